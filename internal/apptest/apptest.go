// Package apptest starts reckon's dev stack for tests that drive it whole
// (the HTTP API's, the command line's): a new test schema, the embedded
// Temporal server in memory, the run worker and its sandbox, the
// publisher, and the API on 127.0.0.1:0, stopped when the test ends.
package apptest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// Start starts the dev stack with the tokens of RECKON_TOKENS (tokens),
// fault injection fc and further variables (name, value pairs, which win);
// the sandbox runs unconfined where bubblewrap is missing.
func Start(t testing.TB, tokens string, fc fault.Config, vars ...string) *app.Stack {
	t.Helper()
	s := pgtest.New(t)
	env := map[string]string{
		"DATABASE_URL": s.URL, "RECKON_DATA_DIR": sandboxtest.Dir(t), "RECKON_HTTP_ADDR": "127.0.0.1:0",
		"RECKON_TOKENS": tokens, "RECKON_LOG_LEVEL": "error",
	}
	for i := 0; i+1 < len(vars); i += 2 {
		env[vars[i]] = vars[i+1]
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		env["RECKON_SANDBOX_UNCONFINED"] = "1"
	}
	cfg, err := config.LoadFrom(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	st, err := app.StartDev(context.Background(), cfg, app.DevConfig{
		Kernel: app.KernelConfig{InMemory: true, Fault: &fc},
		Outbox: outbox.Config{PollInterval: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
