package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
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

// TestInvisibleCharactersInTokenFiles: a file saved with a byte order mark
// (as some editors do) began its first line with U+FEFF, so a commented-out
// first entry ("\ufeff#old:operator:…") was not a comment but a live
// operator token named "\ufeff#old", and an uncommented one named
// "\ufeffann" recorded its rulings as operator:\ufeffann, which reads as
// operator:ann but is another actor. The mark is dropped, and a name
// holding a control or format character (invisible, or reordering what
// follows) is a start-up error naming the line.
func TestInvisibleCharactersInTokenFiles(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("\ufeff#old:operator:old-secret-1\nann:operator:ann-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.Load("", file)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := toks.Authenticate("old-secret-1"); ok {
		t.Errorf("the commented-out first line after a byte order mark authenticates as %+q", p.Name)
	}
	if err := os.WriteFile(file, []byte("\ufeffann:operator:ann-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if toks, err = auth.Load("", file); err != nil {
		t.Fatal(err)
	}
	if p, ok := toks.Authenticate("ann-secret-1"); !ok || p.Name != "ann" {
		t.Errorf("first entry after a byte order mark: %+q %v, want ann", p.Name, ok)
	}
	for _, name := range []string{"a\u200bnn", "ann\u202e", "an\x1bn", "ann\u00ad"} {
		_, err := auth.Parse(name + ":operator:ann-secret-1")
		if err == nil || !strings.Contains(err.Error(), "RECKON_TOKENS") {
			t.Errorf("name %+q: %v, want a configuration error", name, err)
		}
	}
}
