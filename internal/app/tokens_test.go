package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
)

// tokensAPI starts the API of a core whose tokens come from RECKON_TOKENS
// and a tokens file with content; it returns the core, the file, the log
// and whoami (the status and role a secret gets from GET /v1/whoami).
func tokensAPI(t *testing.T, content string) (*Core, string, *reckontest.Buffer, func(secret string) (int, string)) {
	t.Helper()
	s := pgtest.New(t)
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	core, err := NewCore(context.Background(), testConfig(t, map[string]string{
		"DATABASE_URL": s.URL, "RECKON_DATA_DIR": t.TempDir(),
		"RECKON_TOKENS": "envtok:reader:secret-env-1", "RECKON_TOKENS_FILE": file,
	}), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	logs := &reckontest.Buffer{}
	core.Log = zerolog.New(logs)
	api, err := core.NewAPI(nil, core.OperationsService(nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	whoami := func(secret string) (int, string) {
		t.Helper()
		r := reckontest.Call(t, http.MethodGet, srv.URL+"/v1/whoami", secret, "")
		role, _ := r.Body["role"].(string)
		return r.Status, role
	}
	return core, file, logs, whoami
}

// TestReloadTokens: ReloadTokens (what SIGHUP calls) swaps the whole set
// read from RECKON_TOKENS_FILE: a commented-out token is refused on the
// next request, a new one accepted, a role change applies, RECKON_TOKENS
// stays; a file that does not parse, or is gone, changes nothing and the
// log names the line; the log counts tokens and never shows a secret.
func TestReloadTokens(t *testing.T) {
	t.Parallel()
	core, file, logs, whoami := tokensAPI(t, "alice:reader:secret-alice-1\nbob:operator:secret-bob-1\n")
	expect := func(when, secret string, status int, role string) {
		t.Helper()
		if gotStatus, gotRole := whoami(secret); gotStatus != status || (status == http.StatusOK && gotRole != role) {
			t.Errorf("%s: %s answers %d %q, want %d %q", when, secret, gotStatus, gotRole, status, role)
		}
	}
	expect("start", "secret-alice-1", 200, "reader")
	expect("start", "secret-bob-1", 200, "operator")

	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# alice:reader:secret-alice-1\nbob:reader:secret-bob-1\ncarol:operator:secret-carol-1\n")
	expect("file rewritten, not reloaded", "secret-alice-1", 200, "reader")
	if err := core.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	expect("reloaded", "secret-alice-1", 401, "")
	expect("reloaded", "secret-bob-1", 200, "reader")
	expect("reloaded", "secret-carol-1", 200, "operator")
	expect("reloaded", "secret-env-1", 200, "reader")
	if out := logs.String(); !strings.Contains(out, `"level":"info"`) || !strings.Contains(out, `"tokens":3`) {
		t.Errorf("the reload's log does not count 3 tokens at info level:\n%s", out)
	}

	// Neither a file that fails to parse on line 2 nor a missing one is
	// applied, not even its good first line.
	write("dave:operator:secret-dave-1\nbroken\n")
	err := core.ReloadTokens()
	if err == nil || !strings.Contains(err.Error(), "RECKON_TOKENS_FILE line 2") {
		t.Fatalf("broken file: %v, want an error naming RECKON_TOKENS_FILE line 2", err)
	}
	if out := logs.String(); !strings.Contains(out, `"level":"error"`) || !strings.Contains(out, "RECKON_TOKENS_FILE line 2") {
		t.Errorf("the failed reload's log does not name the line:\n%s", out)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := core.ReloadTokens(); err == nil {
		t.Fatal("a missing file reloaded")
	}
	expect("failed reloads", "secret-dave-1", 401, "")
	expect("failed reloads", "secret-bob-1", 200, "reader")
	expect("failed reloads", "secret-carol-1", 200, "operator")
	expect("failed reloads", "secret-alice-1", 401, "")
	if core.Tokens.Len() != 3 {
		t.Errorf("%d tokens after failed reloads, want 3", core.Tokens.Len())
	}

	if out := logs.String(); strings.Contains(out, "secret-") {
		t.Errorf("the log shows a secret:\n%s", out)
	}
}

// TestReloadRefusesAnEmptyTokensFile: SIGHUP after the tokens file was
// truncated, or left with comments only, keeps the tokens in force and
// logs why; a file that says it is empty on purpose is applied.
func TestReloadRefusesAnEmptyTokensFile(t *testing.T) {
	t.Parallel()
	core, file, logs, whoami := tokensAPI(t, "alice:reader:secret-alice-1\n")
	for _, content := range []string{"", "# alice:reader:secret-alice-1\n\n"} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		err := core.ReloadTokens()
		if err == nil || !strings.Contains(err.Error(), "RECKON_TOKENS_FILE names no token") {
			t.Fatalf("file %q reloaded: %v", content, err)
		}
		if status, _ := whoami("secret-alice-1"); status != http.StatusOK {
			t.Fatalf("after refusing file %q, alice answers %d", content, status)
		}
	}
	if out := logs.String(); !strings.Contains(out, `"level":"error"`) || !strings.Contains(out, auth.AllowEmptyDirective) {
		t.Errorf("the refused reload's log does not say how to empty the file on purpose:\n%s", out)
	}
	if err := os.WriteFile(file, []byte(auth.AllowEmptyDirective+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := core.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	if status, _ := whoami("secret-alice-1"); status != http.StatusUnauthorized {
		t.Errorf("after an empty-on-purpose file, alice answers %d", status)
	}
	if status, _ := whoami("secret-env-1"); status != http.StatusOK {
		t.Errorf("RECKON_TOKENS's token answers %d after the file emptied", status)
	}
}

// TestReloadTokensOnSIGHUP sends the test process a real SIGHUP (caught
// here first, so the process survives it) and sees ReloadTokensOn apply
// the rewritten file; AddToken's token (dev's generated one) survives.
func TestReloadTokensOnSIGHUP(t *testing.T) {
	t.Parallel()
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGHUP)
	t.Cleanup(func() { signal.Stop(guard) })

	core, file, logs, whoami := tokensAPI(t, "alice:reader:secret-alice-1\n")
	core.AddToken("dev", "operator", "secret-dev-1")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	core.ReloadTokensOn(ctx, syscall.SIGHUP)

	if err := os.WriteFile(file, []byte("carol:operator:secret-carol-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if status, _ := whoami("secret-carol-1"); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the tokens within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status, _ := whoami("secret-alice-1"); status != http.StatusUnauthorized {
		t.Errorf("removed token after SIGHUP: %d, want 401", status)
	}
	if status, role := whoami("secret-dev-1"); status != http.StatusOK || role != "operator" {
		t.Errorf("AddToken's token after SIGHUP: %d %q, want 200 operator", status, role)
	}

	// Truncated, then SIGHUP: refused, carol keeps her access.
	if err := os.Truncate(file, 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reckontest.Eventually(t, 10*time.Second, "the truncated file's reload is refused", func() bool {
		return strings.Contains(logs.String(), "RECKON_TOKENS_FILE names no token")
	})
	if status, _ := whoami("secret-carol-1"); status != http.StatusOK {
		t.Errorf("carol after SIGHUP on a truncated file: %d, want 200", status)
	}
}
