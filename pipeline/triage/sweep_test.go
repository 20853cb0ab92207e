package triage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

func TestSweepJournalsOneVerdictPerWall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1",
		opSpec{id: "op-1", outcome: "completed"},
		opSpec{id: "op-2", outcome: "uncertain"},
		opSpec{id: "op-3", tool: "mcp__create_issue", outcome: "crash"})
	e.seedRun("run-2", opSpec{id: "op-1", outcome: "uncertain", errorType: kernel.ErrorTypeValidation})
	e.seedRun("run-3", opSpec{id: "op-1", outcome: "completed"}, opSpec{id: "op-2", outcome: "rejected"})

	rep, err := e.sweeper(Config{}).Sweep(context.Background(), SweepParams{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs != 2 || rep.Journaled != 2 || rep.Failed != 0 {
		t.Fatalf("report: %+v", rep)
	}
	// Nothing reaches the journal before the publisher delivers it.
	if v := e.runVerdicts("run-1"); len(v) != 0 {
		t.Fatalf("verdict visible before publishing: %+v", v)
	}
	e.drain()

	v1 := e.runVerdicts("run-1")
	if len(v1) != 1 {
		t.Fatalf("run-1 verdicts: %+v", v1)
	}
	v := v1[0]
	if v.Kind != kernel.VerdictKindReconciliation || !v.NeedsAttention || v.Supervisor != supervisor.BuiltinName ||
		v.PromptVersion != supervisor.BuiltinVersion || len(v.WallDigest) != 64 || v.Part != 1 || v.Parts != 1 ||
		!reflect.DeepEqual(v.OperationIDs, []string{"op-2", "op-3"}) || len(v.Causes) == 0 || len(v.Remedies) == 0 || v.Lesson == "" {
		t.Fatalf("run-1 verdict: %+v", v)
	}
	recs := e.reconciled("run-1")
	if len(recs) != 2 || len(recs["op-2"]) != 1 || len(recs["op-3"]) != 1 {
		t.Fatalf("run-1 reconciliations: %+v", recs)
	}
	for op, evs := range recs {
		var d kernel.Reconciliation
		_ = evs[0].DecodeData(&d)
		if evs[0].Actor != kernel.ActorSupervisor || d.Basis != kernel.BasisInference || d.Effect != kernel.EffectUnknown ||
			evs[0].ParentEventID == nil || evs[0].ParentEventID.EventID != "run-1/"+op+"/started" || evs[0].SourceID != kernel.SourceKernel {
			t.Fatalf("%s reconciliation: %+v %+v", op, evs[0], d)
		}
		var evid reconcileEvidence
		if err := json.Unmarshal(d.Evidence, &evid); err != nil || evid.WallDigest != v.WallDigest || !strings.Contains(evid.Verdict.EventID, "run-1/verdict/") {
			t.Fatalf("%s evidence: %s", op, d.Evidence)
		}
	}
	// A rejected-before-execution failure reported as uncertain is none.
	var d kernel.Reconciliation
	r2 := e.reconciled("run-2")["op-1"]
	if len(r2) != 1 || r2[0].DecodeData(&d) != nil || d.Effect != kernel.EffectNone {
		t.Fatalf("run-2 op-1: %+v", r2)
	}
	if len(e.runVerdicts("run-3")) != 0 {
		t.Fatal("a settled run got a verdict")
	}
	for _, run := range []string{"run-1", "run-2"} {
		if left := e.unsettled(run); len(left) != 0 {
			t.Fatalf("%s still lists %v", run, left)
		}
	}
	// A sweep with nothing unsettled writes nothing.
	before := e.outboxRows()
	rep, err = e.sweeper(Config{}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Runs != 0 || len(rep.Walls) != 0 || e.outboxRows() != before {
		t.Fatalf("idle sweep: %+v %v", rep, err)
	}
}

// The wall is the dedup: fresh operations after an earlier verdict are
// triaged again (the old "one verdict per run, ever" guard stranded them).
func TestRetriageFreshOperations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"})
	sw := e.sweeper(Config{})
	if rep, err := sw.Sweep(context.Background(), SweepParams{}); err != nil || rep.Journaled != 1 {
		t.Fatalf("first sweep: %+v %v", rep, err)
	}
	e.drain()
	// Fresh uncertain operations appear in the same run (say, a resumed
	// agent reporting more work).
	e.ingest(e.opEvents("run-1", e.t0.Add(10*60e9), opSpec{id: "op-7", outcome: "uncertain"}, opSpec{id: "op-8", outcome: "crash"})...)
	if got := e.unsettled("run-1"); !reflect.DeepEqual(got, []string{"op-7", "op-8"}) {
		t.Fatalf("listing: %v", got)
	}
	rep, err := sw.Sweep(context.Background(), SweepParams{Project: "acme"})
	if err != nil || rep.Journaled != 1 {
		t.Fatalf("second sweep: %+v %v", rep, err)
	}
	e.drain()
	vs := e.runVerdicts("run-1")
	if len(vs) != 2 || !reflect.DeepEqual(vs[1].OperationIDs, []string{"op-7", "op-8"}) {
		t.Fatalf("verdicts: %+v", vs)
	}
	// The second wall carried the earlier verdict: the built-in lesson says so.
	if !strings.Contains(vs[1].Lesson, "triaged 1 time(s) before") {
		t.Fatalf("earlier verdict not in the wall: %q", vs[1].Lesson)
	}
	if len(e.reconciled("run-1")["op-1"]) != 1 {
		t.Fatal("op-1 was reconciled twice")
	}
	if left := e.unsettled("run-1"); len(left) != 0 {
		t.Fatalf("still unsettled: %v", left)
	}
}

// A verdict enqueued but not yet published settles its operations for the
// next sweep too: the listing lags the outbox, the sweep does not.
func TestNoSecondVerdictBeforePublishing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", outcome: "crash"})
	sw := e.sweeper(Config{})
	if rep, err := sw.Sweep(context.Background(), SweepParams{}); err != nil || rep.Journaled != 1 {
		t.Fatalf("first sweep: %+v %v", rep, err)
	}
	rows := e.outboxRows()
	rep, err := sw.Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 0 || rep.Count(OutcomeSettled) != 1 || e.outboxRows() != rows {
		t.Fatalf("second sweep before publishing: %+v %v (rows %d → %d)", rep, err, rows, e.outboxRows())
	}
	e.drain()
	if vs := e.runVerdicts("run-1"); len(vs) != 1 {
		t.Fatalf("verdicts: %d", len(vs))
	}
}

// Operations a human has reconciled are never in a wall, whether the human
// verdict is journaled or still in the outbox.
func TestHumanVerdictsNeverInAWall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", outcome: "uncertain"}, opSpec{id: "op-3", outcome: "crash"})
	e.humanReconcile("run-1", "op-1", kernel.EffectOccurred)
	e.drain()
	e.humanReconcile("run-1", "op-2", kernel.EffectNone) // pending in the outbox
	var seen [][]string
	sup := decideFunc{name: "spy", f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		seen = append(seen, w.OperationIDs())
		return supervisor.Builtin{}.Decide(ctx, w)
	}}
	rep, err := e.sweeper(Config{Supervisor: sup}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	if !reflect.DeepEqual(seen, [][]string{{"op-3"}}) {
		t.Fatalf("walls: %v", seen)
	}
	e.drain()
	recs := e.reconciled("run-1")
	for _, op := range []string{"op-1", "op-2"} {
		if len(recs[op]) != 1 || recs[op][0].Actor != "operator:alice" {
			t.Fatalf("%s: %+v", op, recs[op])
		}
	}
}

// A human verdict that lands while the supervisor is deciding wins: the
// supervisor's wall is rolled back whole and rebuilt without it.
func TestHumanVerdictMidWall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", outcome: "uncertain"})
	var calls atomic.Int32
	var walls [][]string
	sup := decideFunc{name: "racer", f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		walls = append(walls, w.OperationIDs())
		if calls.Add(1) == 1 {
			e.humanReconcile("run-1", "op-2", kernel.EffectOccurred)
		}
		return supervisor.Builtin{}.Decide(ctx, w)
	}}
	m := NewMetrics(nil)
	rep, err := e.sweeper(Config{Supervisor: sup, Metrics: m}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 || rep.Failed != 0 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	if !reflect.DeepEqual(walls, [][]string{{"op-1", "op-2"}, {"op-1"}}) {
		t.Fatalf("walls: %v", walls)
	}
	// The first wall, written on the run as read under its lock, found the
	// ruling (the guard) and went the checked way, which refused it; the
	// rebuilt wall was written on the run read again.
	assertWrites(t, m, 1, 1, 0)
	e.drain()
	recs := e.reconciled("run-1")
	if len(recs["op-2"]) != 1 || recs["op-2"][0].Actor != "operator:alice" || len(recs["op-1"]) != 1 {
		t.Fatalf("reconciliations: %+v", recs)
	}
	vs := e.runVerdicts("run-1")
	if len(vs) != 1 || !reflect.DeepEqual(vs[0].OperationIDs, []string{"op-1"}) {
		t.Fatalf("verdicts: %+v", vs)
	}
}

// An oversized pile is split deterministically; each part is its own
// verdict saying part k of n.
func TestOversizedPileIsSplit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", uncertainOps(5)...)
	var dry []string
	sw := e.sweeper(Config{MaxOpsPerWall: 2})
	rep, err := sw.Sweep(context.Background(), SweepParams{DryRun: true})
	if err != nil || rep.Count(OutcomeDryRun) != 3 || e.outboxRows() != 0 {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	for _, w := range rep.Walls {
		dry = append(dry, strings.Join(w.Operations, ","))
	}
	if rep.Walls[0].Wall == nil || rep.Walls[0].Wall.Digest != rep.Walls[0].Digest {
		t.Fatalf("dry run keeps the wall: %+v", rep.Walls[0])
	}
	walls, err := sw.Walls(context.Background(), "acme", "run-1")
	if err != nil || len(walls) != 3 || walls[2].Part != 3 || walls[2].Parts != 3 || walls[2].Digest == "" {
		t.Fatalf("Walls: %+v %v", walls, err)
	}
	m := NewMetrics(nil)
	rep, err = e.sweeper(Config{MaxOpsPerWall: 2, Metrics: m}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 3 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	// Every part on the one read: each part's writes are the next one's
	// pending events, not a change of the run.
	assertWrites(t, m, 3, 0, 0)
	e.drain()
	vs := e.runVerdicts("run-1")
	sort.Slice(vs, func(i, j int) bool { return vs[i].Part < vs[j].Part })
	var got []string
	for i, v := range vs {
		if v.Part != i+1 || v.Parts != 3 {
			t.Fatalf("verdict %d: part %d of %d", i, v.Part, v.Parts)
		}
		got = append(got, strings.Join(v.OperationIDs, ","))
	}
	want := []string{"op-1,op-2", "op-3,op-4", "op-5"}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(dry, want) {
		t.Fatalf("parts %v, dry %v, want %v", got, dry, want)
	}
	// Byte bound: huge args make one operation per wall.
	parts := split([]pipeline.WallOperation{{OperationID: "a", Args: json.RawMessage(`"` + strings.Repeat("x", 900) + `"`)}, {OperationID: "b", Args: json.RawMessage(`"` + strings.Repeat("x", 900) + `"`)}}, 50, 1000)
	if len(parts) != 2 {
		t.Fatalf("byte split: %d parts", len(parts))
	}
}

func TestBudgetLeavesRunsForTheNextSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, r := range ids("run-", 3) {
		e.seedRun(r, opSpec{id: "op-1", outcome: "uncertain"})
	}
	rep, err := e.sweeper(Config{MaxWalls: 1, Concurrency: 1}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 || rep.Count(OutcomeBudget) != 2 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	e.drain()
	rep, err = e.sweeper(Config{}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 2 {
		t.Fatalf("next sweep: %+v %v", rep, err)
	}
	// Token budget: a supervisor that spends 100 tokens per wall, budget 150.
	e2 := newEnv(t)
	for _, r := range ids("run-", 4) {
		e2.seedRun(r, opSpec{id: "op-1", outcome: "uncertain"})
	}
	spender := decideFunc{name: "spender", f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		d, err := supervisor.Builtin{}.Decide(ctx, w)
		d.Usage.PromptTokens = 100
		return d, err
	}}
	rep, err = e2.sweeper(Config{Supervisor: spender, MaxTokens: 150, Concurrency: 1}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 2 || rep.Count(OutcomeBudget) != 2 || rep.Tokens != 200 {
		t.Fatalf("token budget: %+v %v", rep, err)
	}
}

// Probe proofs become basis probe; the built-in supervisor decides them.
func TestProbeEvidenceBecomesProbeBasis(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root, ws := workspace(t, "run-1")
	if err := os.WriteFile(filepath.Join(ws, "proof.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("ok\n"))
	e.seedRunWorkspace("run-1", ws,
		opSpec{id: "op-1", outcome: "uncertain", postcondition: map[string]string{"path": "proof.txt", "sha256": hex.EncodeToString(sum[:])}},
		opSpec{id: "op-2", outcome: "uncertain", postcondition: map[string]string{"path": "never.txt"}})
	sw := e.sweeper(Config{Probes: probe.Set{probe.Workspace{Root: root, Owners: operations.Owners{Pool: e.s.Pool}}, probe.Child{Journal: e.j}}})
	rep, err := sw.Sweep(context.Background(), SweepParams{Project: "acme", RunID: "run-1"})
	if err != nil || rep.Journaled != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	e.drain()
	recs := e.reconciled("run-1")
	want := map[string]string{"op-1": kernel.EffectOccurred, "op-2": kernel.EffectNone}
	for op, eff := range want {
		var d kernel.Reconciliation
		if len(recs[op]) != 1 || recs[op][0].DecodeData(&d) != nil || d.Effect != eff || d.Basis != kernel.BasisProbe {
			t.Fatalf("%s: %+v", op, d)
		}
		if !strings.Contains(string(d.Evidence), probe.WorkspaceName) {
			t.Fatalf("%s: probe evidence not attached: %s", op, d.Evidence)
		}
	}
	if vs := e.runVerdicts("run-1"); len(vs) != 1 || vs[0].NeedsAttention {
		t.Fatalf("verdict: %+v", vs)
	}
}

// A supervisor whose output fails validation writes nothing, is reported,
// and is counted; so is one that errors.
func TestInvalidSupervisorOutputWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", outcome: "uncertain"})
	bad := decideFunc{name: "bad", f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		d, _ := supervisor.Builtin{}.Decide(ctx, w)
		d.Operations = d.Operations[:1]
		d.Operations[0].Basis = kernel.BasisProbe
		return d, nil
	}}
	m := NewMetrics(nil)
	rep, err := e.sweeper(Config{Supervisor: bad, Metrics: m}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Failed != 1 || rep.Journaled != 0 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	if !strings.Contains(rep.Walls[0].Error, `missing "op-2"`) || !strings.Contains(rep.Walls[0].Error, "basis is probe") {
		t.Fatalf("error: %s", rep.Walls[0].Error)
	}
	if n := e.outboxRows(); n != 0 {
		t.Fatalf("%d outbox rows written", n)
	}
	if got := testutil.ToFloat64(m.invalid.WithLabelValues("bad")); got != 1 {
		t.Fatalf("invalid outputs counted %v", got)
	}
	if left := e.unsettled("run-1"); len(left) != 2 {
		t.Fatalf("unsettled: %v", left)
	}
}

func TestRenderCard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", outcome: "uncertain", errorType: kernel.ErrorTypeValidation})
	rep, err := e.sweeper(Config{}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	w := rep.Walls[0]
	var b bytes.Buffer
	if err := RenderCard(&b, *w.Verdict, w.Reconciled); err != nil {
		t.Fatal(err)
	}
	card := b.String()
	for _, want := range []string{"SUPERVISOR VERDICT  acme / run-1", "supervisor builtin", "needs attention: YES", "op-1", "unknown", "op-2", "none", "causes", "remedies", "lesson"} {
		if !strings.Contains(card, want) {
			t.Fatalf("card lacks %q:\n%s", want, card)
		}
	}
	if testing.Verbose() {
		t.Logf("card:\n%s", card)
	}
}

func TestWallTimeoutFailsTheWallOnly(t *testing.T) {
	t.Parallel()
	e := twoUncertainRuns(t)
	stuck := builtinBut("stuck", "run-1", func(ctx context.Context) (pipeline.Decision, error) {
		<-ctx.Done()
		return pipeline.Decision{}, ctx.Err()
	})
	rep, err := e.sweeper(Config{Supervisor: stuck, WallTimeout: 100 * time.Millisecond}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Failed != 1 || rep.Journaled != 1 || !strings.Contains(rep.Walls[0].Error+rep.Walls[1].Error, "deadline exceeded") {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
}

// livenessUnknown marks listed operations of one run as of unknown
// liveness, as the listing does when Temporal does not answer.
type livenessUnknown struct {
	*operations.Service
	run string
}

func (l livenessUnknown) List(ctx context.Context, p operations.ListParams) (operations.Page, error) {
	pg, err := l.Service.List(ctx, p)
	for i := range pg.Operations {
		if pg.Operations[i].RunID == l.run {
			pg.Operations[i].LivenessUnknown = true
			pg.Degraded = true
		}
	}
	return pg, err
}

// Operations whose run liveness is unknown may still be running: they wait
// for a sweep that knows.
func TestLivenessUnknownWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "crash"})
	e.seedRun("run-2", opSpec{id: "op-1", outcome: "crash"})
	sw := New(livenessUnknown{e.ops, "run-2"}, Config{})
	rep, err := sw.Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 || rep.Walls[0].RunID != "run-1" || !rep.Degraded {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
}

// The sweep logs exactly one line per wall (plus one summary line).
func TestOneLogLinePerWall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", uncertainOps(3)...)
	e.seedRun("run-2", opSpec{id: "op-1", outcome: "crash"})
	var buf bytes.Buffer
	sw := e.sweeper(Config{MaxOpsPerWall: 2, Log: zerolog.New(&buf)})
	rep, err := sw.Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 3 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	walls, summaries := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		switch m["message"] {
		case "triage wall":
			walls++
			if m["outcome"] != OutcomeJournaled || m["wall_digest"] == "" || m["supervisor"] != supervisor.BuiltinName {
				t.Fatalf("wall line: %v", m)
			}
		case "triage sweep done":
			summaries++
		}
	}
	if walls != 3 || summaries != 1 {
		t.Fatalf("%d wall lines, %d summaries:\n%s", walls, summaries, buf.String())
	}
}

// TestWallDurationIsReported: each wall's result and log line carry how long
// the wall took, the supervisor's decision included (they said 0 for
// every wall, the duration set on a copy of the result).
func TestWallDurationIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", uncertainOps(2)...)
	// The sweep's clock, which the supervisor moves on by its thinking time.
	const think = 30 * time.Millisecond
	var mu sync.Mutex
	clock := e.t0.Add(time.Hour)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	slow := decideFunc{name: "slow", f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		mu.Lock()
		clock = clock.Add(think)
		mu.Unlock()
		return supervisor.Builtin{}.Decide(ctx, w)
	}}
	var buf bytes.Buffer
	rep, err := e.sweeper(Config{Supervisor: slow, Now: now, Log: zerolog.New(&buf)}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	for _, w := range rep.Walls {
		if w.Duration < think {
			t.Errorf("wall %s/%s (%s) reports %v; its supervisor alone took %v", w.Project, w.RunID, w.Outcome, w.Duration, think)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["message"] == "triage wall" {
			if ms, _ := m["duration_ms"].(float64); ms < float64(think.Milliseconds()) {
				t.Errorf("wall log line says duration_ms %v; its supervisor alone took %v", m["duration_ms"], think)
			}
		}
	}
}

// An operation whose probe can tell only later (a missing file while its
// command could still be running) is deferred, not decided: the rest of the
// run is triaged now, the deferred one by the first sweep after its
// recheck time, with the proof.
func TestDeferredUntilProbeCanTell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root, ws := workspace(t, "run-1")
	// op-2 (the run's last operation) declares a file that is missing;
	// its args carry no timeout_s, so the bound is the sandbox's largest
	// timeout plus a minute: 11 minutes after it started.
	e.seedRunWorkspace("run-1", ws,
		opSpec{id: "op-1", outcome: "uncertain"},
		opSpec{id: "op-2", outcome: "uncertain", postcondition: map[string]string{"path": "never.txt"}})
	sweepAt := func(at time.Time) Report {
		t.Helper()
		now := func() time.Time { return at }
		m := NewMetrics(nil)
		sw := e.sweeper(Config{Now: now, Metrics: m, Probes: probe.Set{probe.Workspace{Root: root, Owners: operations.Owners{Pool: e.s.Pool}}}})
		e.asOf("run-1", at)
		rep, err := sw.Sweep(context.Background(), SweepParams{Project: "acme", RunID: "run-1"})
		if err != nil {
			t.Fatal(err)
		}
		e.drain()
		return rep
	}

	rep := sweepAt(e.t0.Add(5 * time.Minute))
	if rep.Journaled != 1 || rep.Count(OutcomeDeferred) != 1 {
		t.Fatalf("first sweep: %+v", rep)
	}
	for _, w := range rep.Walls {
		switch w.Outcome {
		case OutcomeDeferred:
			if !slices.Equal(w.Operations, []string{"op-2"}) {
				t.Fatalf("deferred %v, want op-2", w.Operations)
			}
		case OutcomeJournaled:
			if !slices.Equal(w.Operations, []string{"op-1"}) {
				t.Fatalf("walled %v, want op-1 alone", w.Operations)
			}
		}
	}
	if left := e.unsettled("run-1"); !slices.Equal(left, []string{"op-2"}) {
		t.Fatalf("unsettled after the first sweep: %v", left)
	}

	// Still inside the bound: deferred again, nothing written.
	if rep := sweepAt(e.t0.Add(10 * time.Minute)); rep.Journaled != 0 || rep.Count(OutcomeDeferred) != 1 {
		t.Fatalf("second sweep: %+v", rep)
	}
	// Past it: proven none from the workspace.
	if rep := sweepAt(e.t0.Add(12 * time.Minute)); rep.Journaled != 1 || rep.Count(OutcomeDeferred) != 0 {
		t.Fatalf("third sweep: %+v", rep)
	}
	var d kernel.Reconciliation
	if recs := e.reconciled("run-1"); len(recs["op-2"]) != 1 || recs["op-2"][0].DecodeData(&d) != nil || d.Effect != kernel.EffectNone || d.Basis != kernel.BasisProbe {
		t.Fatalf("op-2 after the bound: %+v", d)
	}
	if left := e.unsettled("run-1"); len(left) != 0 {
		t.Fatalf("unsettled at the end: %v", left)
	}
}

func TestRunScheduleSweeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"})
	sw := e.sweeper(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.RunSchedule(ctx, "@every 1s", SweepParams{}) }()
	reckontest.Eventually(t, 10*time.Second, "the scheduled sweep's verdict", func() bool { return e.outboxRows() > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.drain()
	if vs := e.runVerdicts("run-1"); len(vs) != 1 {
		t.Fatalf("scheduled sweep verdicts: %d", len(vs))
	}
	if err := sw.RunSchedule(context.Background(), "not a spec", SweepParams{}); err == nil {
		t.Fatal("a bad spec must be an error")
	}
}

// lockSpy is the built-in supervisor that, deciding a wall, tries the
// wall's run lock as another sweep would, and notes the parts it found
// free.
type lockSpy struct {
	supervisor.Builtin
	ops  *operations.Service
	mu   sync.Mutex
	free []int
}

func (l *lockSpy) Decide(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
	if free, err := tryRunLock(ctx, l.ops, runKey{w.Project, w.RunID}); err != nil {
		return pipeline.Decision{}, err
	} else if free {
		l.mu.Lock()
		l.free = append(l.free, w.Part)
		l.mu.Unlock()
	}
	return l.Builtin.Decide(ctx, w)
}

// tryRunLock reports whether another sweep, with lock connections of its
// own, could take the run's triage lock (and gives it back).
func tryRunLock(ctx context.Context, ops *operations.Service, rk runKey) (bool, error) {
	locks, err := ops.OpenTriageLocks(ctx, 1)
	if err != nil {
		return false, err
	}
	defer locks.Close()
	run, locked, err := locks.Lock(ctx, rk.project, rk.runID)
	if err != nil || !locked {
		return false, err
	}
	run.Unlock(ctx)
	return true, nil
}

// The run's lock is held while each of its walls is decided and written,
// and released with the commit of the last one (in the same round trip),
// not left behind on the lock connection it goes back to the pool with.
func TestRunLockHeldUntilTheLastWallCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", outcome: "uncertain"}, opSpec{id: "op-3", outcome: "crash"})
	spy := &lockSpy{ops: e.ops}
	sw := e.sweeper(Config{Supervisor: spy, MaxOpsPerWall: 1})
	locks, err := e.ops.OpenTriageLocks(ctx, sw.cfg.Concurrency)
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	piles, _, err := sw.unsettledRuns(ctx, "acme", "run-1", &Report{})
	if err != nil || len(piles) != 1 {
		t.Fatalf("piles %v: %v", piles, err)
	}
	rs := sw.triageRun(ctx, locks, piles[0], false, func(int, int) {})
	if len(rs) != 3 {
		t.Fatalf("%d wall results, want 3: %+v", len(rs), rs)
	}
	for _, r := range rs {
		if r.Outcome != OutcomeJournaled {
			t.Fatalf("part %d: %s %s", r.Part, r.Outcome, r.Error)
		}
	}
	if len(spy.free) > 0 {
		t.Fatalf("the run's lock was free while parts %v were decided", spy.free)
	}
	if free, err := tryRunLock(ctx, e.ops, piles[0].runKey); err != nil || !free {
		t.Fatalf("the run's lock is still held after its last wall (%v)", err)
	}
}

// A supervisor that panics on one run's wall fails that run's walls only:
// the sweep ends, the other run's wall is journaled, the panicking run's
// operations stay unsettled, and its lock is free for the next sweep.
func TestPanicFailsItsRunOnly(t *testing.T) {
	t.Parallel()
	e := twoUncertainRuns(t)
	panicky := builtinBut("panicky", "run-1", func(context.Context) (pipeline.Decision, error) {
		panic("a supervisor's bug")
	})
	var log bytes.Buffer
	rep, err := e.sweeper(Config{Supervisor: panicky, Log: zerolog.New(&log)}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Failed != 1 || rep.Journaled != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	// One line for the failed wall, as for every wall, carrying the stack.
	var lines []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, `"run_id":"run-1"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"stack":`) || !strings.Contains(lines[0], `"outcome":"failed"`) {
		t.Fatalf("run-1's log lines: %q, want one failed wall line with the stack", lines)
	}
	for _, w := range rep.Walls {
		if w.RunID == "run-1" && (w.Outcome != OutcomeFailed || !strings.Contains(w.Error, "panicked")) {
			t.Fatalf("run-1's wall: %+v, want failed naming the panic", w)
		}
	}
	// The next sweep, with a supervisor that works, takes run-1: its lock
	// was released and nothing of the failed wall was written.
	rep, err = e.sweeper(Config{}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 || rep.Walls[0].RunID != "run-1" {
		t.Fatalf("second sweep: %+v %v", rep, err)
	}
}

// panicProbe panics on every operation of run; it applies to all others
// and finds nothing there.
type panicProbe struct{ run string }

func (panicProbe) Name() string { return "panicky" }

func (p panicProbe) Probe(_ context.Context, run probe.Run, _ pipeline.WallOperation) (pipeline.Evidence, bool) {
	if run.RunID == p.run {
		panic("a probe's bug")
	}
	return pipeline.Evidence{}, false
}

// A probe that panics on one run's operation proves nothing and settles
// nothing: that run's walls fail, no verdict is written for it, and the
// other run of the same sweep is still judged; the next sweep, without the
// bug, takes the run.
func TestProbePanicFailsItsRunOnly(t *testing.T) {
	t.Parallel()
	e := twoUncertainRuns(t)
	rep, err := e.sweeper(Config{Probes: probe.Set{panicProbe{run: "run-1"}}}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Failed != 1 || rep.Journaled != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	for _, w := range rep.Walls {
		switch {
		case w.RunID == "run-1" && (w.Outcome != OutcomeFailed || !strings.Contains(w.Error, "panicked") || w.Verdict != nil || len(w.Reconciled) > 0):
			t.Fatalf("run-1's wall: %+v, want failed naming the panic, nothing written", w)
		case w.RunID == "run-2" && w.Outcome != OutcomeJournaled:
			t.Fatalf("run-2's wall: %+v, want journaled", w)
		}
	}
	rep, err = e.sweeper(Config{}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 || rep.Walls[0].RunID != "run-1" {
		t.Fatalf("second sweep: %+v %v", rep, err)
	}
}

// twoUncertainRuns is an env with runs run-1 and run-2, one uncertain
// operation each.
func twoUncertainRuns(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"})
	e.seedRun("run-2", opSpec{id: "op-1", outcome: "uncertain"})
	return e
}

// builtinBut is the built-in supervisor, except on run's walls, which f
// decides.
func builtinBut(name, run string, f func(ctx context.Context) (pipeline.Decision, error)) decideFunc {
	return decideFunc{name: name, f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		if w.RunID == run {
			return f(ctx)
		}
		return supervisor.Builtin{}.Decide(ctx, w)
	}}
}

// assertWrites checks how many walls m counted written on the run as read
// under its lock, found it changed, and written the checked way.
func assertWrites(t *testing.T, m *Metrics, onRead, reread, checked float64) {
	t.Helper()
	got := [3]float64{testutil.ToFloat64(m.writes.WithLabelValues(writeOnRead)),
		testutil.ToFloat64(m.writes.WithLabelValues(writeReread)), testutil.ToFloat64(m.writes.WithLabelValues(writeChecked))}
	if got != [3]float64{onRead, reread, checked} {
		t.Fatalf("wall writes on_read, reread, checked = %v, want %v", got, [3]float64{onRead, reread, checked})
	}
}
