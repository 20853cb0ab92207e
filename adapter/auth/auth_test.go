package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
)

func TestTokensParsing(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"a:b", "a:admin:secret-123", "a:reader:short", "a:agent:secret-123:x:y:z", "a:agent:secret-123:src|", "a:agent:secret-123::", "a:agent:secret-123::p|", "a:agent:secret-123::p q"} {
		if _, err := auth.Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The fourth field grants sources; the token's own name is always one.
func TestSourcesGranted(t *testing.T) {
	t.Parallel()
	toks, err := auth.Parse("bot:agent:bot-secret-1:ci-bot|nightly, ann:operator:ann-secret-1, rd:reader:rd-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	bot, ok := toks.Authenticate("bot-secret-1")
	if !ok {
		t.Fatal("bot not authenticated")
	}
	for src, want := range map[string]bool{"bot": true, "ci-bot": true, "nightly": true, "ann": false, "kernel": false} {
		if got := bot.MayWrite(src); got != want {
			t.Errorf("bot may write %q = %v, want %v", src, got, want)
		}
	}
	ann, _ := toks.Authenticate("ann-secret-1")
	if !ann.MayWrite("ann") || ann.MayWrite("bot") {
		t.Errorf("ann: %+v", ann)
	}
	// A token named like a reserved source does not get to write it.
	reserved, err := auth.Parse("kernel:agent:kernel-secret-1,operator-x:operator:opx-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{"kernel-secret-1", "opx-secret-1"} {
		p, _ := reserved.Authenticate(sec)
		if p.MayWrite(p.Name) {
			t.Errorf("%s may write its reserved name", p.Name)
		}
	}
}

// Granting a reserved source is a start-up error naming where and the rule.
func TestReservedSourcesCannotBeGranted(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"kernel", "supervisor", "operator", "operator-alice", "operators"} {
		_, err := auth.Parse("bot:agent:bot-secret-1:mine|" + src)
		if err == nil {
			t.Errorf("granting %q accepted", src)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "RECKON_TOKENS") || !strings.Contains(msg, `"`+src+`"`) || !strings.Contains(msg, "can never be granted") || strings.Contains(msg, "\n") {
			t.Errorf("granting %q: %q does not name the variable, the source and the rule on one line", src, msg)
		}
	}
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# agents\nbot:agent:bot-secret-1\nsup:agent:sup-secret-1:supervisor\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := auth.Load("", file)
	if err == nil || !strings.Contains(err.Error(), "RECKON_TOKENS_FILE line 3") || !strings.Contains(err.Error(), `"supervisor"`) {
		t.Fatalf("file grant of supervisor: %v", err)
	}
	if _, err := auth.Parse("rd:reader:rd-secret-1:x"); err == nil || !strings.Contains(err.Error(), "reader") {
		t.Fatalf("sources on a reader: %v", err)
	}
}

// The fifth field limits a token to projects; without it a token sees
// every project. The sources field may stay empty before it.
func TestProjectsLimitAToken(t *testing.T) {
	t.Parallel()
	toks, err := auth.Parse("bot:agent:bot-secret-1::acme|beta, ci:agent:ci-secret-1:ci-bot:acme, rd:reader:rd-secret-1::acme, all:reader:all-secret-1")
	if err != nil {
		t.Fatal(err)
	}
	for secret, want := range map[string]map[string]bool{
		"bot-secret-1": {"acme": true, "beta": true, "gamma": false},
		"ci-secret-1":  {"acme": true, "beta": false},
		"rd-secret-1":  {"acme": true, "beta": false},
		"all-secret-1": {"acme": true, "beta": true, "gamma": true},
	} {
		p, ok := toks.Authenticate(secret)
		if !ok {
			t.Fatalf("%s not authenticated", secret)
		}
		for project, may := range want {
			if p.MaySee(project) != may {
				t.Errorf("%s may see %q = %v, want %v", p.Name, project, !may, may)
			}
		}
	}
	ci, _ := toks.Authenticate("ci-secret-1")
	if !ci.MayWrite("ci-bot") || !ci.Limited() {
		t.Errorf("ci: %+v", ci)
	}
	all, _ := toks.Authenticate("all-secret-1")
	if all.Limited() {
		t.Errorf("all: %+v is limited", all)
	}
}

// A tokens file says on purpose that it names no token with the directive;
// without it, an empty file is not "empty on purpose".
func TestEmptyOnPurpose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"empty": "", "comments": "# all revoked\n", "directive": "# revoked for now\n" + auth.AllowEmptyDirective + "\n"} {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		toks, err := auth.Load("", file)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if toks.Len() != 0 || toks.EmptyOnPurpose() != (name == "directive") {
			t.Errorf("%s: %d tokens, on purpose %v", name, toks.Len(), toks.EmptyOnPurpose())
		}
	}
}
