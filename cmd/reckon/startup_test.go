package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel/manifest"
)

// reckonOnce runs the test binary as `reckon args...` with env added to
// the test's environment, and returns its exit code, stdout and stderr.
func reckonOnce(ctx context.Context, t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), execMainEnv+"=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	default:
		t.Fatalf("reckon %v: %v", args, err)
		return 0, "", ""
	}
}

// oneLine fails the test unless out is exactly one line containing every
// one of want.
func wantOneLine(t *testing.T, what, out string, want ...string) {
	t.Helper()
	line := strings.TrimSuffix(out, "\n")
	if line == "" || strings.Contains(line, "\n") {
		t.Fatalf("%s: want one line, got %q", what, out)
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Fatalf("%s: %q does not say %q", what, line, w)
		}
	}
}

// TestWorkerRefusesUntraversableDataDir: a worker running as root whose
// RECKON_DATA_DIR lies below a directory the sandbox's user (65534)
// cannot pass stops at start-up, before it dials Temporal, with one line
// naming the variable and the directory in the way, instead of failing
// every run_command later (effect none). A worker that is not root runs
// the sandbox as itself, so the same directory is no reason to stop.
func TestWorkerRefusesUntraversableDataDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := pgtest.New(t)
	data := t.TempDir() // its parent is private to the test's user (0700)
	code, _, stderr := reckonOnce(ctx, t, []string{"DATABASE_URL=" + s.URL, "RECKON_DATA_DIR=" + data,
		// Never dialled when the check stops start-up first.
		"TEMPORAL_ADDRESS=127.0.0.1:1", "RECKON_LOG_LEVEL=error", "RECKON_SANDBOX_UNCONFINED=", "RECKON_MCP_SERVERS="}, "worker")
	if os.Geteuid() != 0 {
		if strings.Contains(stderr, "RECKON_DATA_DIR") {
			t.Fatalf("a worker that is not root refused its own data directory: %s", stderr)
		}
		return
	}
	if code != exitFailure {
		t.Fatalf("worker exited %d, want %d; stderr %q", code, exitFailure, stderr)
	}
	wantOneLine(t, "worker", stderr, "RECKON_DATA_DIR", "sandbox user 65534", filepath.Dir(data), "not searchable")
}

// triageSetup is a schema holding one agent run with an uncertain
// operation (a sweep would decide it) and a workspace manifest a worker
// recorded for kernel run acme/k1, as of now.
func triageSetup(t *testing.T) *reckontest.Bundle {
	t.Helper()
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	now := time.Now()
	r := reckontest.Run{Project: "acme", RunID: "agent-1", Source: "agent-x"}
	b.Ingest(r.RunStarted(now), r.Started("op-1", "run_command", now), r.Failed("op-1", "uncertain", now), r.RunFailed(now))
	if _, err := (manifest.Store{Pool: b.Schema.Pool}).Put(b.Ctx,
		manifest.Key{Project: "acme", RunID: "k1", OperationID: "op-1", Phase: manifest.PhaseBefore},
		manifest.Manifest{TakenAt: now.UTC()}); err != nil {
		t.Fatal(err)
	}
	return b
}

// journalCount is the number of events in the schema's journal.
func journalCount(t *testing.T, b *reckontest.Bundle) int {
	t.Helper()
	var n int
	if err := b.Schema.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM journal_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTriageRefusesWrongDataDir: `reckon triage` given another
// RECKON_DATA_DIR than the workers' (here: one that lacks the workspace a
// worker recorded a manifest of) stops before it decides anything, with
// one line naming the variable and the run whose workspace it cannot
// see, and records nothing. Given the workers' directory, the same sweep
// runs and decides the uncertain operation.
func TestTriageRefusesWrongDataDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := triageSetup(t)
	data := sandboxtest.Dir(t)
	env := []string{"DATABASE_URL=" + b.Schema.URL, "RECKON_DATA_DIR=" + data, "TEMPORAL_ADDRESS=", "RECKON_LOG_LEVEL=error", "RECKON_MCP_SERVERS="}
	before := journalCount(t, b)
	code, stdout, stderr := reckonOnce(ctx, t, env, "triage")
	if code != exitFailure || stdout != "" {
		t.Fatalf("triage with the wrong data directory exited %d, stdout %q", code, stdout)
	}
	wantOneLine(t, "triage", stderr, "RECKON_DATA_DIR", data, "run k1 of project acme", "workers' RECKON_DATA_DIR")
	if after := journalCount(t, b); after != before {
		t.Fatalf("the refused triage recorded %d events", after-before)
	}
	var queued int
	if err := b.Schema.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel_event_outbox`).Scan(&queued); err != nil || queued != 0 {
		t.Fatalf("the refused triage queued %d events (%v)", queued, err)
	}

	if err := os.MkdirAll(filepath.Join(data, "workspaces", "acme", "k1"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = reckonOnce(ctx, t, env, "triage")
	if code != exitOK || !strings.Contains(stdout, "1 journaled") {
		t.Fatalf("triage with the workers' data directory: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if after := journalCount(t, b); after <= before {
		t.Fatal("the sweep with the workers' data directory recorded nothing")
	}
}

// TestTriageRefusesUnreachableMCPServer: a configured MCP server that does
// not answer stops `reckon triage` with one line naming
// RECKON_MCP_SERVERS and the entry; the servers that answer pass.
func TestTriageRefusesUnreachableMCPServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := triageSetup(t)
	data := sandboxtest.Dir(t)
	if err := os.MkdirAll(filepath.Join(data, "workspaces", "acme", "k1"), 0o755); err != nil {
		t.Fatal(err)
	}
	servers, _ := json.Marshal([]map[string]any{
		{"name": "issues", "command": []string{os.Args[0], "mcp-test-server", "--store", filepath.Join(t.TempDir(), "issues.json")}, "env": map[string]string{execMainEnv: "1"}},
		{"name": "gone", "url": "http://127.0.0.1:1/mcp"},
	})
	before := journalCount(t, b)
	code, _, stderr := reckonOnce(ctx, t, []string{"DATABASE_URL=" + b.Schema.URL, "RECKON_DATA_DIR=" + data, "TEMPORAL_ADDRESS=",
		"RECKON_LOG_LEVEL=error", "RECKON_MCP_SERVERS=" + string(servers)}, "triage")
	if code != exitFailure {
		t.Fatalf("triage with an unreachable MCP server exited %d: %s", code, stderr)
	}
	wantOneLine(t, "triage", stderr, "RECKON_MCP_SERVERS", `[1] ("gone") cannot be reached`)
	if after := journalCount(t, b); after != before {
		t.Fatalf("the refused triage recorded %d events", after-before)
	}
}

// TestDevTokenNeverInTheLog: `reckon dev` without RECKON_TOKENS, its
// standard error not a terminal, writes its generated operator token to
// <RECKON_DATA_DIR>/dev-token (mode 0600), names the file in one log line,
// and never writes the token to its output; the token signs in.
func TestDevTokenNeverInTheLog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := pgtest.New(t)
	data := sandboxtest.Dir(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "dev")
	cmd.Env = append(os.Environ(), execMainEnv+"=1", "DATABASE_URL="+s.URL, "RECKON_DATA_DIR="+data,
		"RECKON_HTTP_ADDR=127.0.0.1:0", "RECKON_TOKENS=", "RECKON_TOKENS_FILE=", "TEMPORAL_ADDRESS=",
		"RECKON_LOG_FORMAT=json", "RECKON_LOG_LEVEL=debug", "RECKON_MCP_SERVERS=")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var logs bytes.Buffer
	apiAddr, tokenFile := make(chan string, 1), make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			var line struct {
				APIAddr   string `json:"api_addr"`
				TokenFile string `json:"token_file"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			if line.APIAddr != "" {
				apiAddr <- line.APIAddr
			}
			if line.TokenFile != "" {
				tokenFile <- line.TokenFile
			}
		}
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		<-drained
	}
	defer stop()
	var addr, file string
	for addr == "" || file == "" {
		select {
		case addr = <-apiAddr:
		case file = <-tokenFile:
		case <-ctx.Done():
			t.Fatalf("dev did not announce its API and token file; output so far:\n%s", logs.String())
		}
	}
	if file != filepath.Join(data, "dev-token") {
		t.Fatalf("token file %s, want it in RECKON_DATA_DIR", file)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v (want 0600)", err, fi.Mode())
	}
	raw, _ := os.ReadFile(file)
	token := strings.TrimSpace(string(raw))
	if len(token) < 16 {
		t.Fatalf("token file holds %q", raw)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the generated token got %d from whoami", resp.StatusCode)
	}
	stop()
	if strings.Contains(logs.String(), token) || strings.Contains(stdout.String(), token) {
		t.Fatalf("the generated token appears in dev's output:\n%s%s", stdout.String(), logs.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !json.Valid([]byte(l)) {
			t.Fatalf("dev's log stream holds a line that is not JSON: %q", l)
		}
	}
}

// TestVersion: `reckon version` and `reckon --version` print the build's
// one line; --json the same information as one object.
func TestVersion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lines []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := reckonOnce(ctx, t, nil, args...)
		if code != exitOK || stderr != "" {
			t.Fatalf("reckon %v: exit %d, stderr %q", args, code, stderr)
		}
		wantOneLine(t, strings.Join(args, " "), stdout, "reckon ", "revision ", "go1.")
		lines = append(lines, stdout)
	}
	if lines[0] != lines[1] {
		t.Fatalf("version %q and --version %q differ", lines[0], lines[1])
	}
	code, stdout, _ := reckonOnce(ctx, t, nil, "version", "--json")
	var in struct{ Version, Go, Platform string }
	if code != exitOK || json.Unmarshal([]byte(stdout), &in) != nil || in.Version == "" || !strings.HasPrefix(in.Go, "go1.") || in.Platform == "" {
		t.Fatalf("version --json: exit %d, %q", code, stdout)
	}
}
