package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
)

// TestAmbiguousTokensAreConfigurationErrors: a secret listed twice for
// different principals would make the role a bearer gets depend on the
// order of the entries ("rd:reader:S,ann:operator:S" could let the
// reader's secret reconcile), and a name over 512 bytes (the bound of
// every id an event carries) would make every event the token's holder
// causes invalid. Both are refused at start-up, naming the variable; the
// same secret repeated for the same principal, and one name with two
// secrets (a rotation), stay allowed.
func TestAmbiguousTokensAreConfigurationErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"rd:reader:same-secret-1,ann:operator:same-secret-1",
		"bot:agent:same-secret-1,ann:agent:same-secret-1",
		"bot:agent:same-secret-1:a,bot:operator:same-secret-1:a",
		strings.Repeat("n", 513) + ":operator:long-name-secret",
	} {
		if _, err := auth.Parse(bad); err == nil || !strings.Contains(err.Error(), "RECKON_TOKENS") {
			t.Errorf("%.60q: %v, want a configuration error naming RECKON_TOKENS", bad, err)
		}
	}
	// The same secret in RECKON_TOKENS and RECKON_TOKENS_FILE for two
	// principals is as ambiguous.
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("ann:operator:same-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Load("rd:reader:same-secret-1", file); err == nil || !strings.Contains(err.Error(), "RECKON_TOKENS_FILE line 1") {
		t.Errorf("secret shared across RECKON_TOKENS and the file: %v", err)
	}
	for _, ok := range []string{
		"ann:operator:ann-secret-1,ann:operator:ann-secret-2",
		"ann:operator:ann-secret-1,ann:operator:ann-secret-1",
	} {
		if _, err := auth.Parse(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}
