package auth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel/auth"
)

// TestCommentedOutTokensStayRevoked: an operator revokes a token in
// RECKON_TOKENS_FILE by commenting its line out. A comment holding a comma
// ("# revoked: old-ops:operator:…, ci:agent:…") was split at the comma
// like RECKON_TOKENS, and every entry after the first comma was loaded as
// a live token: the revoked operator secret still reconciled.
func TestCommentedOutTokensStayRevoked(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	body := "# revoked 2026-11-30: leaked-a:agent:leaked-secret-a, old-ops:operator:old-ops-secret-1\n" +
		"  #old-rd:reader:old-rd-secret-1,old-bot:agent:old-bot-secret-1:nightly\n" +
		"ann:operator:ann-secret-1\n" +
		"bot:agent:bot-secret-1, rd:reader:rd-secret-1\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.Load("", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, revoked := range []string{"leaked-secret-a", "old-ops-secret-1", "old-rd-secret-1", "old-bot-secret-1:nightly", "old-bot-secret-1"} {
		if p, ok := toks.Authenticate(revoked); ok {
			t.Errorf("commented-out secret %q authenticates as %+v", revoked, p)
		}
	}
	// Entries of a line that is not a comment are all live, as before.
	for _, live := range []string{"ann-secret-1", "bot-secret-1", "rd-secret-1"} {
		if _, ok := toks.Authenticate(live); !ok {
			t.Errorf("secret %q does not authenticate", live)
		}
	}
	if toks.Len() != 3 {
		t.Errorf("%d tokens loaded, want 3", toks.Len())
	}
}
