package triage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
)

// env is one test's bundle (reckontest) on the real clock, with the
// sweep's own helpers.
type env struct {
	*reckontest.Bundle
	t   testing.TB
	s   *pgtest.Schema
	j   *journal.Store
	ops *operations.Service
	t0  time.Time
}

func newEnv(t testing.TB) *env {
	t.Helper()
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	return &env{Bundle: b, t: t, s: b.Schema, j: b.Journal, ops: b.Ops,
		t0: time.Now().UTC().Add(-time.Hour).Truncate(time.Second)}
}

func (e *env) sweeper(cfg Config) *Sweeper {
	return New(e.ops, cfg)
}

// ingest journals evs as taken when they happened: each one's commit time
// (ingested_at, the database's clock the probes measure waits on) is its
// ts, so a test's history an hour old is an hour old on either clock.
func (e *env) ingest(evs ...kernel.Event) {
	e.t.Helper()
	e.Ingest(evs...)
	for _, ev := range evs {
		pgtest.RedateJournal(e.t, e.s.Pool, `UPDATE journal_events SET ingested_at = ts WHERE source_id = $1 AND event_id = $2`, ev.SourceID, ev.EventID)
	}
}

func (e *env) event(run, id, typ string, ts time.Time, data any) kernel.Event {
	e.t.Helper()
	return e.eventBy(kernel.SourceKernel, kernel.ActorKernel, run, id, typ, ts, data)
}

// asOf dates the run's journaled events so that the database's clock
// reads at, relative to them, when a sweep reads the run now: the probes,
// which measure waits on that clock, see the run as a sweep at at would.
// (The events' own times, the workflow's clock, are left as they are.)
func (e *env) asOf(run string, at time.Time) {
	e.t.Helper()
	pgtest.RedateJournal(e.t, e.s.Pool, `UPDATE journal_events SET ingested_at = ts - ($1::timestamptz - clock_timestamp()) WHERE project = 'acme' AND run_id = $2`, at, run)
}

// agentEvent is an event an agent (or the MCP gateway) reports under
// source, actor agent, as POST /v1/events takes it.
func (e *env) agentEvent(source, run, id, typ string, ts time.Time, data any) kernel.Event {
	e.t.Helper()
	return e.eventBy(source, kernel.ActorAgent, run, id, typ, ts, data)
}

func (e *env) eventBy(source, actor, run, id, typ string, ts time.Time, data any) kernel.Event {
	e.t.Helper()
	ev, err := kernel.NewEvent(source, id, "acme", run, typ, actor, ts, data)
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

// opSpec describes one operation to seed.
type opSpec struct {
	id, tool string
	// outcome: "uncertain" (tool.failed effect uncertain), "crash" (no
	// terminal event), "completed", "rejected" (tool.failed effect none).
	outcome       string
	errorType     string
	postcondition any
}

// seedRun journals a finished run (run.started … run.failed) with ops.
func (e *env) seedRun(run string, ops ...opSpec) {
	e.t.Helper()
	e.seedRunWorkspace(run, "", ops...)
}

// seedRunWorkspace seeds a run; with a workspace, as a kernel run (a
// kernel_runs row), whose workspace probes find under their root.
func (e *env) seedRunWorkspace(run, workspace string, ops ...opSpec) {
	e.t.Helper()
	data := map[string]any{}
	if workspace != "" {
		data["workspace"] = workspace
		if _, err := e.s.Pool.Exec(context.Background(),
			`INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES ('acme', $1, '{}', '\x00', $2)`,
			run, "reckon/acme/"+run); err != nil {
			e.t.Fatal(err)
		}
	}
	evs := []kernel.Event{e.event(run, run+"/run/started", kernel.TypeRunStarted, e.t0, data)}
	evs = append(evs, e.opEvents(run, e.t0, ops...)...)
	evs = append(evs, e.event(run, run+"/run/failed", kernel.TypeRunFailed, e.t0.Add(time.Minute), kernel.RunFailed{Error: "stopped after an uncertain operation"}))
	e.ingest(evs...)
}

func (e *env) opEvents(run string, ts time.Time, ops ...opSpec) []kernel.Event {
	var evs []kernel.Event
	for i, o := range ops {
		at := ts.Add(time.Duration(i) * time.Second)
		tool := o.tool
		if tool == "" {
			tool = "run_command"
		}
		sd := map[string]any{"operation_id": o.id, "tool": tool, "args": map[string]any{"command": "echo " + o.id}}
		if o.postcondition != nil {
			sd["postcondition"] = o.postcondition
		}
		evs = append(evs, e.event(run, run+"/"+o.id+"/started", kernel.TypeToolStarted, at, sd))
		switch o.outcome {
		case "uncertain":
			et := o.errorType
			if et == "" {
				et = kernel.ErrorTypeInjectedFault
			}
			evs = append(evs, e.event(run, run+"/"+o.id+"/failed", kernel.TypeToolFailed, at.Add(time.Millisecond),
				kernel.ToolFailed{OperationID: o.id, ErrorType: et, Error: "worker lost", Effect: kernel.EffectUncertain}))
		case "completed":
			evs = append(evs, e.event(run, run+"/"+o.id+"/completed", kernel.TypeToolCompleted, at.Add(time.Millisecond),
				kernel.ToolCompleted{OperationID: o.id}))
		case "rejected":
			evs = append(evs, e.event(run, run+"/"+o.id+"/failed", kernel.TypeToolFailed, at.Add(time.Millisecond),
				kernel.ToolFailed{OperationID: o.id, ErrorType: kernel.ErrorTypeValidation, Error: "bad", Effect: kernel.EffectNone}))
		case "crash":
		default:
			e.t.Fatalf("unknown outcome %q", o.outcome)
		}
	}
	return evs
}

func (e *env) drain() { e.t.Helper(); e.Drain() }

// unsettled lists the run's unsettled operation ids (project acme).
func (e *env) unsettled(run string) []string {
	e.t.Helper()
	pg, err := e.ops.List(context.Background(), operations.ListParams{Project: "acme", RunID: run, Limit: operations.MaxLimit})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, it := range pg.Operations {
		ids = append(ids, it.OperationID)
	}
	return ids
}

// runVerdicts returns the journaled supervisor verdicts of a run.
func (e *env) runVerdicts(run string) []kernel.Verdict {
	e.t.Helper()
	evs, err := e.j.RunEvents(context.Background(), "acme", run)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []kernel.Verdict
	for _, ev := range evs {
		if ev.Type == kernel.TypeSupervisorVerdict {
			var v kernel.Verdict
			if err := ev.DecodeData(&v); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

// reconciled returns the journaled reconciliations of a run by operation.
func (e *env) reconciled(run string) map[string][]journal.StoredEvent {
	e.t.Helper()
	evs, err := e.j.RunEvents(context.Background(), "acme", run)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]journal.StoredEvent{}
	for _, ev := range evs {
		if ev.Type == kernel.TypeOperationReconciled {
			out[ev.OperationID()] = append(out[ev.OperationID()], ev)
		}
	}
	return out
}

// outboxRows counts all outbox rows.
func (e *env) outboxRows() int {
	e.t.Helper()
	return pgtest.Int(e.t, e.s.Pool, "SELECT count(*) FROM kernel_event_outbox")
}

// outboxPending counts undelivered, unparked outbox rows.
func (e *env) outboxPending() int {
	e.t.Helper()
	return pgtest.Int(e.t, e.s.Pool, "SELECT count(*) FROM kernel_event_outbox_undelivered")
}

// sweepAgentRunUnsettled sweeps agent-run with probes, expecting one wall
// journaled, and fails the test unless op-1's one reconciliation leaves
// it unknown on no probe's proof: the agent's own account settled
// nothing; why names that account.
func (e *env) sweepAgentRunUnsettled(probes probe.Set, why string) {
	e.t.Helper()
	rep, err := e.sweeper(Config{Probes: probes}).Sweep(context.Background(), SweepParams{Project: "acme", RunID: "agent-run"})
	if err != nil || rep.Journaled != 1 {
		e.t.Fatalf("sweep: %+v %v", rep, err)
	}
	e.drain()
	recs := e.reconciled("agent-run")
	var d kernel.Reconciliation
	if len(recs["op-1"]) != 1 || recs["op-1"][0].DecodeData(&d) != nil {
		e.t.Fatalf("reconciliations: %+v", recs)
	}
	if d.Basis == kernel.BasisProbe || d.Effect != kernel.EffectUnknown {
		e.t.Fatalf("%s: effect %s basis %s, evidence %s", why, d.Effect, d.Basis, d.Evidence)
	}
}

func (e *env) humanReconcile(run, op, effect string) kernel.Event {
	e.t.Helper()
	rec, err := e.ops.Reconcile(context.Background(), operations.ReconcileParams{
		Project: "acme", RunID: run, OperationID: op, Effect: effect,
		Note: "checked by hand", Basis: kernel.BasisOperator, Actor: "operator:alice",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec.Event
}

// decideFunc adapts a function to pipeline.Supervisor.
type decideFunc struct {
	name string
	f    func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error)
}

func (d decideFunc) Name() string { return d.name }
func (d decideFunc) Decide(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
	return d.f(ctx, w)
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// uncertainOps specifies n failed_uncertain operations op-1 … op-n.
func uncertainOps(n int) []opSpec {
	out := make([]opSpec, n)
	for i, id := range ids("op-", n) {
		out[i] = opSpec{id: id, outcome: "uncertain"}
	}
	return out
}

// workspace makes a data directory's workspaces root with run's (project
// acme) workspace in it, and returns both.
func workspace(t *testing.T, run string) (root, ws string) {
	t.Helper()
	root = t.TempDir()
	ws = filepath.Join(root, "acme", run)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, ws
}

// Walls builds a run's walls exactly as a sweep would show them to the
// supervisor (listing, settled and pending filters, probes, bounds), without
// deciding, locking or writing anything. Production code takes its walls
// from a dry-run Sweep, which keeps each wall; this is the tests' shortcut.
func (s *Sweeper) Walls(ctx context.Context, project, runID string) ([]pipeline.Wall, error) {
	if project == "" || runID == "" {
		return nil, kernel.Errorf(kernel.EInvalid, "walls: project and run_id are required")
	}
	piles, _, err := s.unsettledRuns(ctx, project, runID, &Report{})
	if err != nil {
		return nil, err
	}
	var out []pipeline.Wall
	for _, p := range piles {
		read, clock, err := s.readRun(ctx, nil, pipeline.Clock{}, p.runKey, 1)
		if err != nil {
			return nil, err
		}
		ws, _, err := s.buildWalls(ctx, p, read, clock)
		if err != nil {
			return nil, err
		}
		out = append(out, ws...)
	}
	return out, nil
}
