package triage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/internal/mcpserver"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// buildReckon builds the reckon binary once per test binary.
var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

func reckonBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "reckon-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "reckon")
		cmd := exec.Command("go", "build", "-o", buildBin, "github.com/seed-7bc021c3/reckon/cmd/reckon")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build reckon: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// Two `reckon triage` processes against one database never triage the same
// run twice: each run gets exactly one verdict, and the model is asked
// exactly once per run. The two are forced to contend: the model holds
// every answer until the second process has tried the runs the first one
// holds (a barrier), so the test fails if the per-run lock does not keep
// the second off them.
func TestTwoProcessesNeverTriageOneRunTwice(t *testing.T) {
	t.Parallel()
	bin := reckonBinary(t)
	e := newEnv(t)
	const runs, concurrency = 24, 4
	for _, r := range ids("run-", runs) {
		e.seedRun(r, opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", tool: "mcp__create_issue", outcome: "crash"})
	}
	f := fakeopenai.New()
	defer f.Close()
	release := f.Hold()
	defer release()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := append(os.Environ(),
		"DATABASE_URL="+e.s.URL,
		"RECKON_DATA_DIR="+t.TempDir(),
		"RECKON_LOG_FORMAT=json", "RECKON_LOG_LEVEL=warn",
		"RECKON_SUPERVISOR_BASE_URL="+f.URL, "RECKON_SUPERVISOR_MODEL=fake-model", "RECKON_SUPERVISOR_API_KEY=k",
		"RECKON_MCP_SERVERS=", "TEMPORAL_ADDRESS=",
	)
	type result struct {
		rep    Report
		stderr string
		err    error
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, bin, "triage", "--json", "--concurrency", fmt.Sprint(concurrency))
			cmd.Env = env
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			results[i].err = cmd.Run()
			results[i].stderr = errb.String()
			if results[i].err == nil {
				results[i].err = json.Unmarshal(out.Bytes(), &results[i].rep)
			}
		}()
	}
	// The first process takes the locks of its first runs and waits inside
	// the model call for each.
	start(0)
	reckontest.Eventually(t, time.Minute, "the first sweep's model calls", func() bool { return f.InFlight() == concurrency })
	// The second lists the same runs in the same order: it meets the
	// first's locks before any run of its own, so once it too waits in the
	// model with a full slate, it has tried (and been refused) those runs.
	start(1)
	reckontest.Eventually(t, time.Minute, "the second sweep's model calls", func() bool { return f.InFlight() == 2*concurrency })
	release()
	wg.Wait()
	journaled, locked := 0, 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("process %d: %v\n%s", i, r.err, r.stderr)
		}
		journaled += r.rep.Journaled
		locked += r.rep.Count(OutcomeLocked)
		t.Logf("process %d: %d journaled, %d locked, %d settled, %s", i, r.rep.Journaled, r.rep.Count(OutcomeLocked), r.rep.Count(OutcomeSettled), r.rep.Duration)
	}
	if journaled != runs {
		t.Fatalf("journaled %d walls for %d runs", journaled, runs)
	}
	if locked < concurrency {
		t.Fatalf("the second sweep was refused %d runs; it must have met the first's %d locks", locked, concurrency)
	}
	e.drain()
	for _, r := range ids("run-", runs) {
		if vs := e.runVerdicts(r); len(vs) != 1 {
			t.Fatalf("%s has %d verdicts", r, len(vs))
		}
		recs := e.reconciled(r)
		if len(recs["op-1"]) != 1 || len(recs["op-2"]) != 1 {
			t.Fatalf("%s reconciliations: %v", r, recs)
		}
	}
	if n := len(f.Calls()); n != runs {
		t.Fatalf("the model was asked %d times for %d runs", n, runs)
	}
}

// `reckon triage` with the test MCP server configured: the MCP probe asks
// lookup_operation over stdio, and the built-in supervisor turns the
// proofs into basis-probe verdicts.
func TestTriageCommandWithMCPProbe(t *testing.T) {
	t.Parallel()
	bin := reckonBinary(t)
	e := newEnv(t)
	e.seedRun("run-1",
		opSpec{id: "op-1", tool: "mcp__create_issue", outcome: "crash"},
		opSpec{id: "op-2", tool: "mcp__create_issue", outcome: "uncertain"})
	storePath := filepath.Join(t.TempDir(), "issues.json")
	store, err := mcpserver.OpenStore(storePath)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.CreateIssue(mcptool.IdempotencyKey("acme", "run-1", "op-1"), "Disk full on db-3", ""); err != nil {
		t.Fatal(err)
	}
	servers, _ := json.Marshal([]map[string]any{{"name": "issues", "command": []string{bin, "mcp-test-server", "--store", storePath}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "triage", "--project", "acme", "--json")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+e.s.URL, "RECKON_DATA_DIR="+t.TempDir(),
		"RECKON_LOG_FORMAT=json", "RECKON_LOG_LEVEL=warn", "RECKON_SUPERVISOR_BASE_URL=", "RECKON_SUPERVISOR_MODEL=",
		"RECKON_MCP_SERVERS="+string(servers), "TEMPORAL_ADDRESS=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("reckon triage: %v\n%s", err, errb.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Journaled != 1 {
		t.Fatalf("report: %v %s", err, out.String())
	}
	// The command published its own verdicts.
	if n := e.outboxPending(); n != 0 {
		t.Fatalf("%d outbox rows left undelivered", n)
	}
	recs := e.reconciled("run-1")
	for op, want := range map[string]string{"op-1": kernel.EffectOccurred, "op-2": kernel.EffectNone} {
		var d kernel.Reconciliation
		if len(recs[op]) != 1 || recs[op][0].DecodeData(&d) != nil || d.Effect != want || d.Basis != kernel.BasisProbe ||
			!strings.Contains(string(d.Evidence), probe.MCPName) {
			t.Fatalf("%s: %+v", op, d)
		}
	}
	if vs := e.runVerdicts("run-1"); len(vs) != 1 || vs[0].NeedsAttention {
		t.Fatalf("verdict: %+v", vs)
	}
}
