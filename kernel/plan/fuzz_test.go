package plan

import (
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// FuzzDecodePlan: any bytes as a plan never panic the decoder or the
// validator; a plan both accept has a digest, fits MaxPlanBytes, and
// survives a round trip through its JSON unchanged.
func FuzzDecodePlan(f *testing.F) {
	for _, s := range []string{
		`{"steps":[{"tool":"run_command","args":{"command":"echo ok > proof.txt","timeout_s":30},"postcondition":{"path":"proof.txt"}}]}`,
		`{"steps":[{"tool":"delegate","plan":{"steps":[{"tool":"run_command","args":{"command":"true"}}]},"on_uncertain":"reissue"}]}`,
		`{"steps":[{"tool":"run_command","args":{"command":"a\u0000b"}}]}`,
		"{\"steps\":[{\"tool\":\"run_command\",\"args\":{\"command\":\"\xff\"}}]}",
		`{"steps":[{"tool":"run_command","tool":"delegate","args":{"command":"x"}}]}`,
		`{"steps":[{"tool":"run_command","args":{"command":"x"},"on_uncertian":"reissue"}]}`,
		`{"steps":[{"tool":"run_command","args":{"command":"x"},"postcondition":{"path":"../x"}}]}`,
		`{"steps":[]}`, `null`, `[]`, `{"steps":null}`,
	} {
		f.Add([]byte(s))
	}
	tools := NewTools(sandbox.NewRunCommand(sandbox.Config{Unconfined: true}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := DecodePlan(raw)
		if err != nil {
			if c := kernel.ErrorCode(err); c != kernel.EInvalid && c != kernel.ETooLarge {
				t.Fatalf("DecodePlan error of code %q: %v", c, err)
			}
			return
		}
		if err := p.Validate(tools); err != nil {
			return
		}
		if len(raw) > MaxPlanBytes {
			t.Fatalf("accepted a plan of %d bytes", len(raw))
		}
		d1, err := p.Digest()
		if err != nil {
			t.Fatalf("a valid plan has no digest: %v", err)
		}
		again, err := p.Digest()
		if err != nil || string(d1) != string(again) {
			t.Fatalf("digest is not stable")
		}
	})
}
