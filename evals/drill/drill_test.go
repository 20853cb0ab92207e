package drill

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// pickKinds returns the first scenario of each wanted kind from seed.
func pickKinds(seed uint64, kinds ...string) []Scenario {
	all := Generate(seed, 4*len(Kinds))
	var out []Scenario
	for _, k := range kinds {
		for _, s := range all {
			if s.Kind == k {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// openTestStack opens the drill stack on a schema of its own, with the
// filesystem MCP server when node is installed (its path, else ""); opts
// change its configuration.
func openTestStack(ctx context.Context, t *testing.T, opts ...func(*StackConfig)) (*Stack, string) {
	t.Helper()
	s := pgtest.New(t)
	cfg, err := config.LoadFrom(func(k string) string {
		switch k {
		case "DATABASE_URL":
			return s.URL
		case "RECKON_DATA_DIR":
			return sandboxtest.Dir(t)
		case "RECKON_LOG_LEVEL":
			return "error"
		case "RECKON_SANDBOX_UNCONFINED":
			if _, err := exec.LookPath("bwrap"); err != nil {
				return "1"
			}
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	fs, mem := "", ""
	if _, err := exec.LookPath("node"); err == nil {
		abs, _ := filepath.Abs(".")
		fs, mem = FindFilesystemServer(abs), FindMemoryServer(abs)
		if fs == "" || mem == "" {
			t.Fatal("node is installed but @modelcontextprotocol/server-filesystem or server-memory is not: run scripts/ensure-deps.sh")
		}
	}
	sc := StackConfig{Config: cfg, FilesystemServer: fs, MemoryServer: mem, Log: zerolog.Nop()}
	for _, o := range opts {
		o(&sc)
	}
	st, err := OpenStack(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st, fs
}

// TestDrillLive runs drills on the real stack — embedded Temporal, real
// PostgreSQL, the bubblewrap sandbox, the test MCP server over HTTP and the
// filesystem MCP server over stdio — and checks the recorded fixtures:
// truth from the fault records, walls from the sweep, decidability as each
// scenario intends, and a clean built-in score.
func TestDrillLive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	st, fs := openTestStack(ctx, t)

	kinds := []string{KindCmdWriteAfterPost, KindCmdWriteBeforePost, KindMCPIssueAfter, KindMCPIssueBefore,
		KindDelegateUnsettled, KindDelegateSettled, KindMultiReissue, KindClaimsSuccess,
		KindCmdWriteAfterBare, KindCmdMkdirAfter, KindCmdRemoveAfter, KindReissueNewFile,
		KindMCPNoLookup, KindAgentRun, KindClockSkew, KindCmdTimeoutRunning}
	if fs != "" {
		kinds = append(kinds, KindFSWriteAfter, KindFSWriteBefore, KindMemoryAfter, KindMemoryBefore, KindSharedStore)
	}
	type want struct {
		ops       int
		truth     string // truth of every op ("" = mixed)
		decidable bool   // every op decidable
	}
	// Decidable per truth: checkKind says.
	perTruth := map[string]bool{KindCmdTimeoutRunning: true}
	wants := map[string]want{
		KindCmdWriteAfterPost:  {1, "occurred", true},
		KindCmdWriteBeforePost: {1, "none", true},
		KindMCPIssueAfter:      {1, "occurred", true},
		KindMCPIssueBefore:     {1, "none", true},
		// A delegation's truth is its child's effects.
		KindDelegateUnsettled: {1, "", false},
		KindDelegateChild:     {1, "", true}, // the child's own command: the workspace diff
		KindDelegateSettled:   {1, "", true},
		// Decidable since workspace manifests and the MCP state probe:
		// bare commands, directories, removals, re-issues, the
		// filesystem and memory servers.
		KindMultiReissue:      {2, "", true},
		KindClaimsSuccess:     {1, "none", true},
		KindCmdWriteAfterBare: {1, "occurred", true},
		KindCmdMkdirAfter:     {1, "occurred", true},
		KindCmdRemoveAfter:    {1, "occurred", true},
		KindReissueNewFile:    {1, "", true},
		KindFSWriteAfter:      {1, "occurred", true},
		KindFSWriteBefore:     {1, "none", true},
		KindMemoryAfter:       {1, "occurred", true},
		KindMemoryBefore:      {1, "none", true},
		// Outside the probe-friendly set: nothing can ask the server, the
		// agent's report is a claim, the other agent's entity is not the
		// call's to credit; the skewed sweep measures on the database's
		// clock, and the command that ran on past its timeout is read once
		// its bound has passed.
		KindMCPNoLookup:       {1, "", false},
		KindAgentRun:          {1, "", false},
		KindSharedStore:       {1, "", false},
		KindClockSkew:         {1, "", true},
		KindCmdTimeoutRunning: {1, "", false},
	}
	o := Params{Seed: 7, GeneratedBy: "go test ./evals/drill"}
	var all []*evals.Fixture
	for _, sc := range pickKinds(7, kinds...) {
		t0 := time.Now()
		fx, err := st.Drill(ctx, sc, o)
		if err != nil {
			t.Fatalf("%s: %v", sc.RunID, err)
		}
		t.Logf("%s: %d fixtures in %s", sc.RunID, len(fx), time.Since(t0).Round(time.Millisecond))
		for _, f := range fx {
			all = append(all, f)
			if testing.Verbose() && f.Scenario == KindDelegateSettled {
				b, _ := f.Marshal()
				t.Logf("%s", b)
			}
			w := wants[f.Scenario]
			if len(f.Wall.Operations) != w.ops {
				t.Errorf("%s: wall has %d operations, want %d: %+v", f.ID, len(f.Wall.Operations), w.ops, f.Wall.Operations)
			}
			for _, op := range f.Wall.Operations {
				if w.truth != "" && f.Truth[op.OperationID] != w.truth {
					t.Errorf("%s: %s truth %s, want %s", f.ID, op.OperationID, f.Truth[op.OperationID], w.truth)
				}
				e, ok := evals.Decidable(op)
				if perTruth[f.Scenario] {
					continue
				}
				if w.decidable && (!ok || e != f.Truth[op.OperationID]) {
					t.Errorf("%s: %s decidable=%v as %q, want decidable as its truth %s; evidence %+v", f.ID, op.OperationID, ok, e, f.Truth[op.OperationID], op.Evidence)
				}
				if !w.decidable && ok {
					t.Errorf("%s: %s decidable as %s, want undecidable", f.ID, op.OperationID, e)
				}
			}
			if strings.Contains(f.Notes, "DISAGREES") {
				t.Errorf("%s: %s", f.ID, f.Notes)
			}
			checkKind(t, f)
			if f.Wall.Digest == "" {
				t.Errorf("%s: the sweep's wall has no digest", f.ID)
			}
		}
	}
	if fs != "" {
		// A suite: fixtures and manifest written, progress per scenario,
		// and a second suite in the same folder replaces the first.
		dir := t.TempDir()
		for _, seed := range []uint64{11, 12} {
			calls := 0
			res, err := st.GenerateSuite(ctx, Params{Seed: seed, GeneratedBy: "test"}, 3, dir, func(p Progress) {
				calls++
				if p.Total != 3 || p.Done != calls {
					t.Errorf("progress %d/%d at call %d", p.Done, p.Total, calls)
				}
			})
			if err != nil {
				t.Fatalf("suite %d: %v", seed, err)
			}
			fx, err := evals.LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			m, err := evals.ReadManifest(dir)
			if err != nil || m.Seed != seed || m.Count != len(fx) || len(res.Written) != len(fx) || calls != 3 {
				t.Fatalf("suite %d: manifest %+v (%v), %d fixtures loaded, %d written, %d progress calls", seed, m, err, len(fx), len(res.Written), calls)
			}
			kinds := map[string]int{}
			for _, f := range fx {
				if f.Seed != seed {
					t.Errorf("suite %d holds %s of seed %d", seed, f.ID, f.Seed)
				}
				kinds[f.Scenario]++
			}
			if !maps.Equal(res.Scenarios, kinds) || !maps.Equal(m.Scenarios, kinds) {
				t.Errorf("suite %d: scenario counts %v (result) and %v (manifest), want %v", seed, res.Scenarios, m.Scenarios, kinds)
			}
		}
	}
	rep, err := evals.Score(ctx, supervisor.Builtin{}, all, evals.ScoreParams{})
	if err != nil {
		t.Fatal(err)
	}
	m := rep.Metrics
	if m.UnsafeNone+m.UnsafeOccurred+m.InvalidOutputs+m.Errored != 0 {
		t.Errorf("built-in supervisor on drilled walls: %+v", m)
	}
	if m.Decided == 0 {
		t.Error("nothing on the drilled walls was decidable")
	}
}

// TestDrillCrashWindow loses runs mid-command, before and after the
// effect: the operation is listed in crash_window (no terminal event, the
// workflow terminated), its truth is what the workspace showed once the
// command's process was gone, and a declared postcondition makes it
// decidable either way.
func TestDrillCrashWindow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, _ := openTestStack(ctx, t)

	// One scenario of each side of the effect, with and without a
	// postcondition where the seed offers them.
	seen := map[string]bool{}
	var picked []Scenario
	for _, sc := range Generate(3, 40*len(Kinds)) {
		if sc.Kind != KindCmdCrashWindow {
			continue
		}
		post := sc.Plan.Steps[len(sc.Plan.Steps)-1].Postcondition != nil
		k := fmt.Sprintf("after=%v post=%v", sc.Lose.AfterEffect, post)
		if !seen[k] {
			seen[k] = true
			picked = append(picked, sc)
		}
	}
	if len(picked) != 4 {
		t.Fatalf("seed 3 gave crash-window variants %v, want all four", seen)
	}
	var all []*evals.Fixture
	for _, sc := range picked {
		fx, err := st.Drill(ctx, sc, Params{Seed: 3, GeneratedBy: "go test ./evals/drill"})
		if err != nil {
			t.Fatalf("%s: %v", sc.RunID, err)
		}
		if len(fx) != 1 || len(fx[0].Wall.Operations) != 1 {
			t.Fatalf("%s: want one fixture of one operation, got %d", sc.RunID, len(fx))
		}
		f := fx[0]
		all = append(all, f)
		op := f.Wall.Operations[0]
		wantTruth := map[bool]string{true: "occurred", false: "none"}[sc.Lose.AfterEffect]
		if op.OperationID != sc.Lose.OperationID || op.State != "crash_window" || op.Failure != nil || f.Truth[op.OperationID] != wantTruth {
			t.Errorf("%s: %s state %s failure %+v truth %s, want %s in crash_window without failure, truth %s",
				f.ID, op.OperationID, op.State, op.Failure, f.Truth[op.OperationID], sc.Lose.OperationID, wantTruth)
		}
		post := op.Postcondition != nil
		e, decidable := evals.Decidable(op)
		// The workspace proves either side, declared postcondition or not:
		// the diff against the manifest recorded before the command (and
		// the postcondition's file with its hash, or its absence), once the
		// command's timeout has passed (the drill builds walls 6 minutes
		// ahead).
		if !decidable || e != wantTruth {
			t.Errorf("%s (post=%v): decidable=%v as %q, want decidable as %s; evidence %+v", f.ID, post, decidable, e, wantTruth, op.Evidence)
		}
		recs, err := fault.Records(ctx, st.Core.Pool, "drill", sc.RunID)
		if err != nil || len(recs) != 1 || recs[0].Fault != fault.Lost {
			t.Errorf("%s: fault records %+v (%v), want one %s record", sc.RunID, recs, err, fault.Lost)
		}
	}
	rep, err := evals.Score(ctx, supervisor.Builtin{}, all, evals.ScoreParams{})
	if err != nil {
		t.Fatal(err)
	}
	if m := rep.Metrics; m.UnsafeNone+m.UnsafeOccurred+m.InvalidOutputs+m.Errored != 0 || m.Decided == 0 {
		t.Errorf("built-in supervisor on crash-window walls: %+v", m)
	}
}

// checkKind checks what the kinds outside the probe-friendly set must
// show on their walls.
func checkKind(t *testing.T, f *evals.Fixture) {
	t.Helper()
	op := f.Wall.Operations[0]
	switch f.Scenario {
	case KindAgentRun:
		if !op.AgentReported || op.Failure == nil || !op.Failure.AgentReported {
			t.Errorf("%s: an agent's run whose operation is not the agent's report: %+v", f.ID, op)
		}
	case KindCmdTimeoutRunning:
		if op.Failure == nil || op.Failure.ErrorType != kernel.ErrorTypeActivityFailed {
			t.Errorf("%s: the call did not time out: %+v", f.ID, op.Failure)
		}
		// Unconfined, what the left-behind process wrote proves occurred;
		// that it wrote nothing proves nothing: it could have written
		// anywhere, and could outlive any bound.
		e, ok := evals.Decidable(op)
		if want := f.Truth[op.OperationID] == evals.TruthOccurred; ok != want || ok && e != evals.TruthOccurred {
			t.Errorf("%s (truth %s): decidable=%v as %q; evidence %+v", f.ID, f.Truth[op.OperationID], ok, e, op.Evidence)
		}
	case KindClockSkew:
		for _, ev := range op.Evidence {
			if ev.Finding != pipeline.FindingNone {
				continue
			}
			if el := ev.Preconditions; el == nil || el.Elapsed == nil || el.Elapsed.Clock != pipeline.ClockDatabase ||
				time.Duration(el.Elapsed.SkewMS)*time.Millisecond < SkewedSweep-time.Second {
				t.Errorf("%s: never_seen's wait is not measured on the database's clock with the skew recorded: %+v", f.ID, ev.Preconditions)
			}
			if !strings.Contains(f.Notes, "deferred") {
				t.Errorf("%s: the early sweep did not defer the call: %s", f.ID, f.Notes)
			}
		}
	case KindSharedStore:
		if len(op.Evidence) == 0 || !strings.Contains(op.Evidence[0].Detail, "can be written by its other clients") {
			t.Errorf("%s: the shared store's state was not refused: %+v", f.ID, op.Evidence)
		}
	}
}
