package operations_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

func ago(d time.Duration) time.Time { return t0.Add(-d) }

// stateOp is the operation of every TestListingStates case.
const stateOp = "op-1"

// listed is how the listing must show a case's operation.
type listed struct {
	state           string // "" = not listed
	livenessUnknown bool
	notDegraded     bool // liveness unknown from the journal, not from an outage
}

// listingCase is one hand-built journal: the events of one run of source,
// and how the listing must show its operation.
type listingCase struct {
	name   string
	source string
	events func(b reckontest.Run) []kernel.Event
	want   listed
}

// TestListingStates covers every state and settling rule over hand-built
// journals: each case is its own project and run, so one schema serves all.
func TestListingStates(t *testing.T) {
	t.Parallel()
	live := &fakeLiveness{
		running: map[string]bool{"k-running": true, "k-running-young": true, "k-running-ended": true},
		errs:    map[string]bool{"k-down": true, "k-down-young": true},
	}
	e := newEnv(t, live)
	cases := slices.Concat(runLifeCases(), settlingCases(), windowCases(), kernelRunCases())
	projects := ingestCases(t, e, cases)
	t.Cleanup(func() {
		if n := live.asked["k-running-ended"]; n != 0 {
			t.Errorf("Temporal asked %d times about a run whose run.failed is journaled", n)
		}
		if n := live.asked["k-gone-early"]; n == 0 {
			t.Error("Temporal not asked about a kernel run known only by its tool.started")
		}
	})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			items, degraded := e.List(projects[i])
			checkListed(t, items, degraded, projects[i], c.want)
		})
	}
}

// runLifeCases: the operation has no terminal event: whether its run may still be running decides.
func runLifeCases() []listingCase {
	return []listingCase{
		{"ended run, no terminal → crash_window", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(time.Hour)), b.RunFailed(ago(50 * time.Minute))}
		}, listed{state: operations.StateCrashWindow}},
		{"completed run, no terminal → crash_window", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(time.Hour)), b.RunCompleted(ago(50 * time.Minute))}
		}, listed{state: operations.StateCrashWindow}},
		{"no run.started at all, young → liveness unknown → not listed", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Minute))}
		}, listed{}},
		{"no run.started at all, old → stale_in_flight, liveness unknown (not degraded)", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Hour))}
		}, listed{state: operations.StateStaleInFlight, livenessUnknown: true, notDegraded: true}},
		{"no run.started but a run.failed → crash_window", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Minute)), b.RunFailed(ago(time.Minute))}
		}, listed{state: operations.StateCrashWindow}},
		{"kernel tool.started whose run.started has not arrived: Temporal asked", kernel.SourceKernel, func(b reckontest.Run) []kernel.Event {
			b.RunID = "k-gone-early"
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Minute))}
		}, listed{state: operations.StateCrashWindow}},
		{"running external run, old → stale_in_flight", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(11*time.Minute))}
		}, listed{state: operations.StateStaleInFlight}},
		{"running external run, exactly stale threshold → stale_in_flight", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(10*time.Minute))}
		}, listed{state: operations.StateStaleInFlight}},
		{"running external run, young → not unresolved yet", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(9*time.Minute))}
		}, listed{}},
	}
}

// settlingCases: what settles an operation, whichever source wrote it and in whatever order it arrived.
func settlingCases() []listingCase {
	return []listingCase{
		{"completed → settled", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Hour)), b.Completed(stateOp, ago(59*time.Minute))}
		}, listed{}},
		{"blocked → settled", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Hour)), b.Blocked(stateOp, ago(59*time.Minute))}
		}, listed{}},
		{"failed effect=none → settled", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Hour)), b.Failed(stateOp, kernel.EffectNone, ago(59*time.Minute))}
		}, listed{}},
		{"failed effect=occurred → settled", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Hour)), b.Failed(stateOp, kernel.EffectOccurred, ago(59*time.Minute))}
		}, listed{}},
		{"failed effect=uncertain → failed_uncertain", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Hour)), b.Failed(stateOp, kernel.EffectUncertain, ago(59*time.Minute))}
		}, listed{state: operations.StateFailedUncertain}},
		{"failed uncertain in a running run, young → failed_uncertain", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(time.Minute)), b.Failed(stateOp, kernel.EffectUncertain, ago(time.Minute))}
		}, listed{state: operations.StateFailedUncertain}},
		{"legacy: no effect, error_type=activity_failed → failed_uncertain", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Hour)), b.Failed(stateOp, "", ago(59*time.Minute))}
		}, listed{state: operations.StateFailedUncertain}},
		{"failed uncertain then reconciled unknown → settled", "agent-x", func(b reckontest.Run) []kernel.Event {
			s := b.Started(stateOp, "run_command", ago(time.Hour))
			return []kernel.Event{s, b.Failed(stateOp, kernel.EffectUncertain, ago(59*time.Minute)),
				ruling(b.Project, b.RunID, stateOp, kernel.EffectUnknown, s.Key(), ago(30*time.Minute))}
		}, listed{}},
		{"source-agnostic: agent-x tool.started settled by a kernel-source reconciliation", "agent-x", func(b reckontest.Run) []kernel.Event {
			s := b.Started(stateOp, "mcp__create_issue", ago(time.Hour))
			return []kernel.Event{b.RunStarted(ago(2 * time.Hour)), s, b.RunCompleted(ago(40 * time.Minute)),
				ruling(b.Project, b.RunID, stateOp, kernel.EffectOccurred, s.Key(), ago(30*time.Minute))}
		}, listed{}},
		{"source-agnostic: terminal event from another source settles", "agent-x", func(b reckontest.Run) []kernel.Event {
			other := b
			other.Source = "agent-y"
			return []kernel.Event{b.Started(stateOp, "run_command", ago(time.Hour)), other.Completed(stateOp, ago(59*time.Minute))}
		}, listed{}},
		{"settling event ingested in the same batch before its tool.started", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Completed(stateOp, ago(59*time.Minute)), b.Started(stateOp, "run_command", ago(time.Hour))}
		}, listed{}},
	}
}

// windowCases: the listing window: only tool.started events inside it are listed.
func windowCases() []listingCase {
	return []listingCase{
		{"window: tool.started older than the window is not listed", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(168*time.Hour+time.Second))}
		}, listed{}},
		{"window: tool.started just inside the window is listed", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(168*time.Hour-time.Second)), b.RunFailed(ago(time.Hour))}
		}, listed{state: operations.StateCrashWindow}},
		{"window: tool.started and terminal inside the window → never listed", "agent-x", func(b reckontest.Run) []kernel.Event {
			return []kernel.Event{b.Started(stateOp, "run_command", ago(167*time.Hour)), b.Completed(stateOp, ago(166*time.Hour))}
		}, listed{}},
		{"window: uncertain failure inside, reconciliation inside → never listed", "agent-x", func(b reckontest.Run) []kernel.Event {
			s := b.Started(stateOp, "run_command", ago(167*time.Hour))
			return []kernel.Event{s, b.Failed(stateOp, kernel.EffectUncertain, ago(167*time.Hour)),
				ruling(b.Project, b.RunID, stateOp, kernel.EffectNone, s.Key(), ago(time.Hour))}
		}, listed{}},
	}
}

// kernelRunCases: kernel runs: Temporal is asked whether the run still runs, unless the journal already says it ended.
func kernelRunCases() []listingCase {
	return []listingCase{
		{"kernel run, Temporal says running, old → stale_in_flight", kernel.SourceKernel, func(b reckontest.Run) []kernel.Event {
			b.RunID = "k-running"
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(20*time.Minute))}
		}, listed{state: operations.StateStaleInFlight}},
		{"kernel run, Temporal says running, young → not listed", kernel.SourceKernel, func(b reckontest.Run) []kernel.Event {
			b.RunID = "k-running-young"
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(time.Minute))}
		}, listed{}},
		{"kernel run, Temporal says gone (journal still running) → crash_window", kernel.SourceKernel, func(b reckontest.Run) []kernel.Event {
			b.RunID = "k-gone"
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(time.Minute))}
		}, listed{state: operations.StateCrashWindow}},
		{"kernel run, Temporal down, old → stale_in_flight with liveness unknown", kernel.SourceKernel, func(b reckontest.Run) []kernel.Event {
			b.RunID = "k-down"
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(time.Hour))}
		}, listed{state: operations.StateStaleInFlight, livenessUnknown: true}},
		{"kernel run, Temporal down, young → hidden (never claimed crashed)", kernel.SourceKernel, func(b reckontest.Run) []kernel.Event {
			b.RunID = "k-down-young"
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(time.Minute))}
		}, listed{}},
		{"kernel run, run.failed journaled → crash_window without asking Temporal", kernel.SourceKernel, func(b reckontest.Run) []kernel.Event {
			b.RunID = "k-running-ended" // Temporal would say running; the journal knows better
			return []kernel.Event{b.RunStarted(ago(time.Hour)), b.Started(stateOp, "run_command", ago(time.Minute)), b.RunFailed(ago(time.Minute))}
		}, listed{state: operations.StateCrashWindow}},
	}
}

// ingestCases ingests each case's events as its own project and run, and
// returns the projects in the cases' order.
func ingestCases(t *testing.T, e *env, cases []listingCase) []string {
	t.Helper()
	projects := make([]string, len(cases))
	for i, c := range cases {
		b := reckontest.Run{Project: fmt.Sprintf("p%02d", i), RunID: fmt.Sprintf("run-%02d", i), Source: c.source}
		evs := c.events(b)
		projects[i] = evs[0].Project
		e.Ingest(evs...)
	}
	// The journal took each event when it is dated, as if ingested live on
	// the test's clock: the journal's own ingested_at (the wall clock, days
	// after T0) would put every tool.started inside the window, and the
	// window cases are about where the ts falls.
	pgtest.RedateJournal(t, e.Schema.Pool, `UPDATE journal_events SET ingested_at = ts`)
	return projects
}

// checkListed fails the test unless a listing of project (items, and
// whether it was degraded) shows stateOp as want says.
func checkListed(t *testing.T, items map[string]operations.Item, degraded bool, project string, want listed) {
	t.Helper()
	if want.state == "" {
		if len(items) != 0 {
			t.Fatalf("listed %v, want nothing", items)
		}
		return
	}
	if len(items) != 1 {
		t.Fatalf("listed %d items (%v), want one %s", len(items), items, want.state)
	}
	for _, it := range items {
		if it.State != want.state {
			t.Fatalf("state %s, want %s", it.State, want.state)
		}
		wantDegraded := want.livenessUnknown && !want.notDegraded
		if it.LivenessUnknown != want.livenessUnknown || degraded != wantDegraded {
			t.Fatalf("liveness_unknown %v degraded %v, want %v and %v", it.LivenessUnknown, degraded, want.livenessUnknown, wantDegraded)
		}
		if it.OperationID != stateOp || it.Project != project || it.StartedKey.EventID == "" || it.Tool == "" {
			t.Fatalf("item fields: %+v", it)
		}
	}
}

// TestStateTransitions follows one operation through its life, moving the
// clock and appending events, and checks the listing after each step.
func TestStateTransitions(t *testing.T) {
	t.Parallel()
	live := &fakeLiveness{running: map[string]bool{"run-k": true}}
	e := newEnv(t, live)
	b := reckontest.Run{Project: "acme", RunID: "run-k", Source: kernel.SourceKernel}
	start := t0
	e.Clock.Set(start)
	s1 := b.Started("op-1", "run_command", start)
	e.Ingest(b.RunStarted(start), s1)

	state := func() string {
		items, _ := e.List("acme")
		it, ok := items["run-k/op-1"]
		if !ok {
			return ""
		}
		return it.State
	}
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"in flight, young: not listed", func() {}, ""},
		{"in flight past StaleAfter: stale_in_flight", func() { e.Clock.Set(start.Add(11 * time.Minute)) }, operations.StateStaleInFlight},
		{"workflow gone (worker crash): crash_window", func() { live.mu.Lock(); live.running["run-k"] = false; live.mu.Unlock() }, operations.StateCrashWindow},
		{"tool.failed uncertain arrives late: failed_uncertain", func() {
			e.Ingest(b.Failed("op-1", kernel.EffectUncertain, start.Add(12*time.Minute)))
		}, operations.StateFailedUncertain},
		{"run.failed journaled: still failed_uncertain", func() { e.Ingest(b.RunFailed(start.Add(12 * time.Minute))) }, operations.StateFailedUncertain},
		{"operator reconciles occurred: settled", func() {
			if _, err := e.Ops.Reconcile(e.Ctx, operations.ReconcileParams{Project: "acme", RunID: "run-k", OperationID: "op-1",
				Effect: kernel.EffectOccurred, Note: "proof.txt exists", Basis: kernel.BasisOperator, Actor: "operator:ann"}); err != nil {
				t.Fatal(err)
			}
			e.Drain()
		}, ""},
		{"a week later: still settled", func() { e.Clock.Set(start.Add(100 * time.Hour)) }, ""},
	}
	for _, st := range steps {
		st.do()
		if got := state(); got != st.want {
			t.Fatalf("%s: state %q, want %q", st.name, got, st.want)
		}
	}
}

func TestListingDetails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: kernel.SourceKernel}

	// A delegation caught in the crash window: no failure; the child summary
	// is computed from the child run's own events.
	child := reckontest.Run{Project: "acme", RunID: kernel.ChildRunID("run-1", "op-2"), Source: kernel.SourceKernel}
	deleg := b.Event("op-2/started", kernel.TypeToolStarted, ago(time.Hour), map[string]any{
		"operation_id": "op-2", "tool": "delegate", "args": map[string]any{"steps": 2},
	})
	// A failed delegation carrying its own summary.
	deleg3 := b.Event("op-3/started", kernel.TypeToolStarted, ago(50*time.Minute), map[string]any{
		"operation_id": "op-3", "tool": "delegate"})
	fail3 := b.Event("op-3/failed", kernel.TypeToolFailed, ago(49*time.Minute), kernel.ToolFailed{
		OperationID: "op-3", ErrorType: "delegated_run_failed", Error: "child failed", Effect: kernel.EffectUncertain,
		ChildRunID: "run-1.op-3", ChildOpsTotal: intp(3), ChildOpsUnresolved: intp(1)})
	// A reissue with a postcondition.
	re := b.Event("op-4/started", kernel.TypeToolStarted, ago(40*time.Minute), map[string]any{
		"operation_id": "op-4", "tool": "run_command", "reissue_of": "op-1",
		"postcondition": map[string]any{"path": "proof.txt"}})
	// Two tool.started rows for one operation (an external agent re-reported
	// it under a new event id): listed once, under the first.
	dupA := b.Event("op-5/started", kernel.TypeToolStarted, ago(30*time.Minute), map[string]any{"operation_id": "op-5", "tool": "run_command"})
	dupB := dupA
	dupB.SourceID, dupB.EventID, dupB.TS = "agent-x", "again", ago(29*time.Minute)
	// Where a gateway's call went: the probes ask that server.
	gw := b.Event("op-6/started", kernel.TypeToolStarted, ago(20*time.Minute), map[string]any{
		"operation_id": "op-6", "tool": "mcp__create_issue", "server": "issues", "upstream_tool": "create_issue", "server_endpoint": "0123456789abcdef"})
	e.Ingest(b.RunStarted(ago(2*time.Hour)), deleg, deleg3, fail3, re, dupA, dupB, gw, b.RunFailed(ago(10*time.Minute)),
		child.RunStarted(ago(time.Hour)), child.Started("op-1", "run_command", ago(time.Hour)), child.Completed("op-1", ago(time.Hour)),
		child.Started("op-2", "run_command", ago(time.Hour)))

	items, _ := e.List("acme")
	d := items["run-1/op-2"]
	if d.State != operations.StateCrashWindow || d.ChildRunID != "run-1.op-2" || d.ChildSummary == nil || *d.ChildSummary != (kernel.ChildSummary{Total: 2, Unresolved: 1}) {
		t.Fatalf("crash-window delegation: %+v", d)
	}
	f := items["run-1/op-3"]
	if f.State != operations.StateFailedUncertain || f.ChildRunID != "run-1.op-3" || f.ChildSummary == nil || *f.ChildSummary != (kernel.ChildSummary{Total: 3, Unresolved: 1}) || f.Failure == nil || f.Failure.ErrorType != "delegated_run_failed" {
		t.Fatalf("failed delegation: %+v", f)
	}
	raw, _ := json.Marshal(f)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if cs, ok := m["child_summary"].(map[string]any); !ok || cs["total"] != 3.0 || cs["unresolved"] != 1.0 {
		t.Fatalf("child_summary in JSON: %s", raw)
	}
	var back operations.Item
	if err := json.Unmarshal(raw, &back); err != nil || back.ChildSummary == nil || back.ChildSummary.Total != 3 {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	r := items["run-1/op-4"]
	if pc, _ := kernel.Canonical(r.Postcondition); r.ReissueOf != "op-1" || string(pc) != `{"path":"proof.txt"}` {
		t.Fatalf("reissue: %+v", r)
	}
	if g := items["run-1/op-6"]; g.Server != "issues" || g.UpstreamTool != "create_issue" || g.ServerEndpoint != "0123456789abcdef" {
		t.Fatalf("gateway call: server %q, upstream_tool %q, server_endpoint %q", g.Server, g.UpstreamTool, g.ServerEndpoint)
	}
	dup := items["run-1/op-5"]
	if dup.StartedKey != dupA.Key() {
		t.Fatalf("duplicate tool.started: listed under %v, want %v", dup.StartedKey, dupA.Key())
	}
	if len(items) != 6 { // op-2 … op-6 of run-1 and op-2 of the child
		t.Fatalf("%d items: %v", len(items), items)
	}

	// A stale open hint (a race left open=true on a settled operation) is
	// re-verified away.
	e.Ingest(b.Completed("op-4", ago(time.Minute)))
	if _, err := e.Schema.Pool.Exec(e.Ctx, `UPDATE journal_events SET open = true WHERE event_id = 'run-1/op-4/started'`); err != nil {
		t.Fatal(err)
	}
	items, _ = e.List("acme")
	if _, ok := items["run-1/op-4"]; ok {
		t.Fatal("settled operation listed through a stale open hint")
	}

	projects, err := e.Ops.Projects(e.Ctx)
	if err != nil || len(projects) != 1 || projects[0] != "acme" {
		t.Fatalf("projects %v %v", projects, err)
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	live := &fakeLiveness{running: map[string]bool{"young": true}}
	e := newEnv(t, live)
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	y := reckontest.Run{Project: "acme", RunID: "young", Source: kernel.SourceKernel}
	var evs []kernel.Event
	for i := 0; i < 25; i++ {
		ts := ago(time.Hour).Add(time.Duration(i) * time.Second)
		evs = append(evs, b.Started(fmt.Sprintf("op-%02d", i), "run_command", ts))
	}
	// Hidden candidates (young, running) interleaved at the end, and three
	// operations sharing one timestamp so ordering falls back to seq.
	evs = append(evs, y.RunStarted(ago(time.Hour)))
	for i := 0; i < 30; i++ {
		evs = append(evs, y.Started(fmt.Sprintf("op-%02d", i), "run_command", ago(time.Minute)))
	}
	for i := 0; i < 3; i++ {
		evs = append(evs, b.Started(fmt.Sprintf("same-%d", i), "run_command", ago(time.Second)))
	}
	evs = append(evs, b.RunFailed(ago(time.Second)))
	e.Ingest(evs...)

	var got []operations.Item
	cursor := ""
	pages := 0
	for {
		p, err := e.Ops.List(e.Ctx, operations.ListParams{Project: "acme", Cursor: cursor, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Operations) > 10 {
			t.Fatalf("page of %d", len(p.Operations))
		}
		got = append(got, p.Operations...)
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if len(got) != 28 {
		t.Fatalf("%d items over %d pages, want 28", len(got), pages)
	}
	for i := 1; i < len(got); i++ {
		if got[i].StartedAt.Before(got[i-1].StartedAt) {
			t.Fatalf("out of order at %d: %v before %v", i, got[i].StartedAt, got[i-1].StartedAt)
		}
		if got[i].RunID == "young" {
			t.Fatal("young in-flight operation listed")
		}
	}
	for i := 0; i < 3; i++ {
		if got[25+i].OperationID != fmt.Sprintf("same-%d", i) {
			t.Fatalf("same-timestamp order: %s at %d", got[25+i].OperationID, 25+i)
		}
	}
	// One run only.
	p, err := e.Ops.List(e.Ctx, operations.ListParams{Project: "acme", RunID: "young"})
	if err != nil || len(p.Operations) != 0 || p.NextCursor != "" {
		t.Fatalf("run filter: %+v %v", p, err)
	}
	for _, bad := range []operations.ListParams{
		{Project: ""}, {Project: "acme", Cursor: "garbage!"}, {Project: "acme", Limit: operations.MaxLimit + 1}, {Project: "acme", Limit: -1},
	} {
		if _, err := e.Ops.List(e.Ctx, bad); kernel.ErrorCode(err) != kernel.EInvalid {
			t.Fatalf("%+v: %v, want invalid", bad, err)
		}
	}
}

func TestDegradedWhenTemporalIsDown(t *testing.T) {
	t.Parallel()
	live := &fakeLiveness{failAll: true}
	e := newEnv(t, live)
	k := reckontest.Run{Project: "acme", RunID: "k1", Source: kernel.SourceKernel}
	x := reckontest.Run{Project: "acme", RunID: "x1", Source: "agent-x"}
	e.Ingest(k.RunStarted(ago(time.Hour)), k.Started("op-1", "run_command", ago(time.Hour)),
		x.RunStarted(ago(time.Hour)), x.Started("op-1", "run_command", ago(time.Hour)), x.RunCompleted(ago(time.Hour)))
	p, err := e.Ops.List(e.Ctx, operations.ListParams{Project: "acme"})
	if err != nil {
		t.Fatalf("Temporal outage must not fail the listing: %v", err)
	}
	if !p.Degraded || len(p.Operations) != 2 {
		t.Fatalf("page %+v", p)
	}
	for _, it := range p.Operations {
		switch it.RunID {
		case "k1":
			if it.State != operations.StateStaleInFlight || !it.LivenessUnknown {
				t.Fatalf("kernel run under outage: %+v", it)
			}
		case "x1":
			if it.State != operations.StateCrashWindow || it.LivenessUnknown {
				t.Fatalf("external run under outage: %+v", it)
			}
		}
	}
}

func TestLivenessBudget(t *testing.T) {
	t.Parallel()
	live := &fakeLiveness{running: map[string]bool{}}
	e := newEnv(t, live)
	e.Ops = operations.New(e.Schema.Pool, operations.Config{Liveness: live, LivenessCalls: 3, Now: e.Clock.Now})
	var evs []kernel.Event
	for i := 0; i < 6; i++ {
		b := reckontest.Run{Project: "acme", RunID: fmt.Sprintf("k%d", i), Source: kernel.SourceKernel}
		evs = append(evs, b.RunStarted(ago(time.Hour)), b.Started("op-1", "run_command", ago(time.Hour)), b.Started("op-2", "run_command", ago(time.Hour)))
	}
	e.Ingest(evs...)
	p, err := e.Ops.List(e.Ctx, operations.ListParams{Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if live.calls != 3 || !p.Degraded || len(p.Operations) != 12 {
		t.Fatalf("calls %d degraded %v items %d", live.calls, p.Degraded, len(p.Operations))
	}
	unknown := 0
	for _, it := range p.Operations {
		if it.LivenessUnknown {
			unknown++
		}
	}
	if unknown != 6 {
		t.Fatalf("%d items with unknown liveness, want 6 (three runs over budget)", unknown)
	}
}

// TestOutageCostsOneTimeout: with Temporal down, a listing over many kernel
// runs stops asking after the first failures instead of paying one call
// timeout per run.
func TestOutageCostsOneTimeout(t *testing.T) {
	t.Parallel()
	live := &fakeLiveness{failAll: true}
	e := newEnv(t, live)
	var evs []kernel.Event
	for i := 0; i < 40; i++ {
		b := reckontest.Run{Project: "acme", RunID: fmt.Sprintf("k%02d", i), Source: kernel.SourceKernel}
		evs = append(evs, b.RunStarted(ago(time.Hour)), b.Started("op-1", "run_command", ago(time.Hour)))
	}
	e.Ingest(evs...)
	p, err := e.Ops.List(e.Ctx, operations.ListParams{Project: "acme"})
	if err != nil || !p.Degraded || len(p.Operations) != 40 {
		t.Fatalf("page %+v %v", p, err)
	}
	if live.calls > 4 {
		t.Fatalf("%d liveness calls during an outage; want at most one concurrent batch (4)", live.calls)
	}
}

// TestAncientDuplicateStartDoesNotHideAnOperation: an agent re-reporting
// its own unsettled operation's tool.started with a ts older than the
// window must not take the operation off the listing. The old copy is out
// of the window and the listing hid the in-window one as "not the first",
// so the operation was in no listing, no wall and no queue while nothing
// had settled it.
func TestAncientDuplicateStartDoesNotHideAnOperation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	s := b.Started("op-1", "run_command", ago(time.Hour))
	e.Ingest(b.RunStarted(ago(2*time.Hour)), s, b.Failed("op-1", kernel.EffectUncertain, ago(59*time.Minute)))
	if items, _ := e.List("acme"); items["run-1/op-1"].State != operations.StateFailedUncertain {
		t.Fatalf("before: %v", items)
	}
	ancient := b.Event("op-1/started-again", kernel.TypeToolStarted, time.Unix(0, 0).UTC(), map[string]any{"operation_id": "op-1", "tool": "run_command"})
	e.Ingest(ancient)
	items, _ := e.List("acme")
	it, ok := items["run-1/op-1"]
	if !ok || it.State != operations.StateFailedUncertain || it.StartedKey != s.Key() {
		t.Fatalf("after a tool.started dated before the window: %v; want op-1 listed under %v", items, s.Key())
	}
	projects, err := e.Ops.Projects(e.Ctx)
	if err != nil || len(projects) != 1 {
		t.Fatalf("projects %v %v", projects, err)
	}
}

// TestFutureDatedStartGoesStaleFromItsIngest: an agent may date its
// tool.started up to a day ahead (clock skew allowance); the operation is
// stale once it has been in the journal for the stale threshold, not only
// once that future ts has passed, so it is not hidden for up to a day.
func TestFutureDatedStartGoesStaleFromItsIngest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	s := b.Started("op-1", "run_command", t0.Add(20*time.Hour))
	e.Ingest(b.RunStarted(ago(time.Hour)), s)
	// The journal took it 11 minutes ago by the test's clock.
	pgtest.RedateJournal(t, e.Schema.Pool, `UPDATE journal_events SET ingested_at = $1 WHERE source_id = $2 AND event_id = $3`, ago(11*time.Minute), s.SourceID, s.EventID)
	items, _ := e.List("acme")
	if it, ok := items["run-1/op-1"]; !ok || it.State != operations.StateStaleInFlight {
		t.Fatalf("future-dated tool.started ingested 11 minutes ago: %v; want stale_in_flight", items)
	}
	// One ingested a minute ago is still young.
	pgtest.RedateJournal(t, e.Schema.Pool, `UPDATE journal_events SET ingested_at = $1 WHERE source_id = $2 AND event_id = $3`, ago(time.Minute), s.SourceID, s.EventID)
	if items, _ := e.List("acme"); len(items) != 0 {
		t.Fatalf("young operation listed: %v", items)
	}
}

// TestStartDatedAtTheWindowsEdgeStaysListed: POST /v1/events takes an
// agent's tool.started dated just inside the window; by its ts alone it
// left the listing (and Projects, hence the sweep) a second later, an
// unsettled operation hidden by the agent's own clock. It counts as inside
// while the journal took it inside the window. A copy of the operation
// that is outside by both its ts and its ingest is not listed and hides
// nothing; one inside by its ingest hides the copies after it.
func TestStartDatedAtTheWindowsEdgeStaysListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const window = 168 * time.Hour
	setIngestedAt := func(ev kernel.Event, at time.Time) {
		t.Helper()
		pgtest.RedateJournal(t, e.Schema.Pool, `UPDATE journal_events SET ingested_at = $1 WHERE source_id = $2 AND event_id = $3`, at, ev.SourceID, ev.EventID)
	}
	// Taken at T0, dated one second after that moment's window start: what
	// ingest lets through.
	b := reckontest.Run{Project: "acme", RunID: "run-1", Source: "agent-x"}
	edge := b.Started("op-1", "run_command", t0.Add(-window+time.Second))
	// An earlier copy of the same operation dated before the window and
	// taken before it too (a report of an earlier version, say).
	stale := b.Event("op-1/started-long-ago", kernel.TypeToolStarted, t0.Add(-window-time.Hour), map[string]any{"operation_id": "op-1", "tool": "run_command"})
	e.Ingest(b.RunStarted(t0.Add(-window+time.Second)), stale, edge, b.RunFailed(t0))
	setIngestedAt(stale, t0.Add(-window-time.Hour))
	setIngestedAt(edge, t0)

	// An hour later the ts is outside the window; the ingest is not.
	e.Clock.Set(t0.Add(time.Hour))
	listed := func(what string, want kernel.EventKey) {
		t.Helper()
		items, _ := e.List("acme")
		it, ok := items["run-1/op-1"]
		if !ok || len(items) != 1 || it.State != operations.StateCrashWindow || it.StartedKey != want {
			t.Fatalf("%s: listed %v; want op-1 in crash_window under %v", what, items, want)
		}
		projects, err := e.Ops.Projects(e.Ctx)
		if err != nil || len(projects) != 1 || projects[0] != "acme" {
			t.Fatalf("%s: projects %v %v; want [acme]", what, projects, err)
		}
	}
	listed("ts an hour before the window, ingested inside it", edge.Key())
	for _, run := range []string{"", "run-1"} {
		p, err := e.Ops.List(e.Ctx, operations.ListParams{Project: "acme", RunID: run, Limit: 1})
		if err != nil || len(p.Operations) != 1 || p.Operations[0].StartedKey != edge.Key() {
			t.Fatalf("run filter %q, a page of one: %+v %v", run, p, err)
		}
	}

	// A later copy dated inside the window: the operation is still listed
	// once, under the copy that counts as inside first.
	again := b.Event("op-1/started-again", kernel.TypeToolStarted, t0.Add(30*time.Minute), map[string]any{"operation_id": "op-1", "tool": "run_command"})
	e.Ingest(again)
	setIngestedAt(again, t0.Add(30*time.Minute))
	listed("a later copy inside the window", edge.Key())

	// Once the ingest has left the window too, the later copy is listed.
	e.Clock.Set(t0.Add(window + time.Minute))
	listed("the edge copy outside by both clocks", again.Key())
	// And once every copy is outside, nothing is.
	e.Clock.Set(t0.Add(30*time.Minute + window + time.Minute))
	if items, _ := e.List("acme"); len(items) != 0 {
		t.Fatalf("every copy outside the window: listed %v", items)
	}
	if projects, err := e.Ops.Projects(e.Ctx); err != nil || len(projects) != 0 {
		t.Fatalf("every copy outside the window: projects %v %v", projects, err)
	}
}
