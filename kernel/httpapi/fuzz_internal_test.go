package httpapi

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// FuzzReconcileBody: the reconcile body through the one strict decoder
// never panics; a body it accepts has text fields storage can hold
// (valid UTF-8, no NUL) and evidence with a canonical form.
func FuzzReconcileBody(f *testing.F) {
	for _, s := range []string{
		`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"occurred","note":"seen","evidence":{"path":"proof.txt"}}`,
		`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"occurred","note":"a\u0000b"}`,
		"{\"project\":\"acme\",\"run_id\":\"r1\",\"operation_id\":\"op-1\",\"effect\":\"occurred\",\"note\":\"\xff\"}",
		`{"project":"acme","project":"other","run_id":"r1","operation_id":"op-1","effect":"none","note":"x"}`,
		`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"none","note":"x","basis":"probe"}`,
		`{"project":"acme","run_id":"r1","operation_id":"op-1","effect":"none","note":"x","evidence":{"a":"\udcff"}}`,
		`{}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b reconcileBody
		if err := DecodeStrict("request body", raw, &b); err != nil {
			if kernel.ErrorCode(err) != kernel.EInvalid {
				t.Fatalf("code %q: %v", kernel.ErrorCode(err), err)
			}
			return
		}
		for _, s := range []string{b.Project, b.RunID, b.OperationID, b.Effect, b.Note} {
			if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("accepted %q", s)
			}
		}
		if ev := bytes.TrimSpace(b.Evidence); len(ev) > 0 {
			if _, err := kernel.Canonical(ev); err != nil {
				t.Fatalf("accepted evidence %q without a canonical form: %v", ev, err)
			}
		}
	})
}
