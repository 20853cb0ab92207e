package kernel

import (
	"errors"
	"fmt"
	"testing"
)

// TestRedacted: the answer (ErrorCode, ErrorMessage) is the public error's,
// also through wrapping, while Error(), what logs print, keeps the detail.
func TestRedacted(t *testing.T) {
	t.Parallel()
	detail := errors.New(`run "r" belongs to source "owner-1"`)
	err := fmt.Errorf("ingest: %w", Redacted(Errorf(EForbidden, "run belongs to another source"), detail))
	if got := ErrorCode(err); got != EForbidden {
		t.Errorf("code %q, want %q", got, EForbidden)
	}
	if got := ErrorMessage(err); got != "run belongs to another source" {
		t.Errorf("answered %q", got)
	}
	if got := err.Error(); got != `ingest: run "r" belongs to source "owner-1"` {
		t.Errorf("logged %q", got)
	}
	if !errors.Is(err, detail) {
		t.Error("the detail is not in the chain")
	}
}
