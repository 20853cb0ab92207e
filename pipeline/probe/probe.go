// Package probe checks downstream state after the fact, so that a verdict
// can rest on a proof instead of an inference: the MCP server is asked what
// happened to an idempotency key, a run_command's declared postcondition is
// checked in the run's workspace, and a delegation is replayed from the
// journal. A probe reports occurred or none only when the state it read
// proves it; anything less is inconclusive, with the reason.
package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// Run is what a probe knows about the operation's run, read from the
// journal by the sweep.
type Run struct {
	Project string
	RunID   string
	// Ended is true when no further step of the run can start: the
	// journal holds run.completed or run.failed, or the kernel's
	// run.awaiting without its run.resumed (the run waits for a settlement
	// and starts nothing before one).
	Ended bool
	// Started lists the run's tool.started operations in the order they
	// ran: by the kernel's (workflow) time when the kernel started every
	// one of them, in journal order otherwise.
	Started []StartedOp
	// Clock is the database's clock as the sweep read the run: every wait
	// a probe proves from is measured on it (pipeline.Clock), and its
	// evidence is dated by it.
	Clock pipeline.Clock
}

// JournaledAt is the journal's commit time of opID's tool.started, nil
// when the run has none.
func (r Run) JournaledAt(opID string) *time.Time {
	s, i := startedOp(r, opID)
	if i < 0 || s.JournaledAt.IsZero() {
		return nil
	}
	t := s.JournaledAt
	return &t
}

// now is when a probe reads the state, on the run's clock: zero when the
// sweep read no clock, which leaves every finding unproven
// (pipeline.ObservedAfterStart).
func (r Run) now() time.Time {
	if !r.Clock.Valid() {
		return time.Time{}
	}
	return r.Clock.Now()
}

// StartedOp is one tool.started of the run.
type StartedOp struct {
	OperationID string
	Tool        string
	// PostconditionPath is the declared postcondition's path, if any.
	PostconditionPath string
	// The fields below are read only from the kernel's own events
	// (tool.started and the operation's terminal event under the
	// kernel's source); an external agent's report leaves them empty.
	//
	// StartedAt and Args are the kernel's tool.started's.
	StartedAt time.Time
	Args      json.RawMessage
	// Manifest is the workspace manifest tool.started carries (a
	// workspace tool of a run that records manifests), nil otherwise.
	Manifest *kernel.WorkspaceManifest
	// Unconfined says the worker ran the call without the sandbox.
	Unconfined bool
	// Answered says the worker answered for the call, so it can no longer
	// act: tool.completed, tool.blocked, or tool.failed with an error
	// type other than activity_failed (a timeout or lost worker leaves
	// the call possibly running).
	Answered bool
	// EndedAt is the time of the kernel's terminal event of the call
	// (tool.completed, tool.blocked or tool.failed), on the workflow's
	// clock like StartedAt; zero without one. The run's next step began
	// after it.
	EndedAt time.Time
	// JournaledAt is the journal's commit time of the tool.started, on
	// the database's clock (whoever wrote the event).
	JournaledAt time.Time
}

// Probe checks one operation. ok is false when the probe does not apply to
// the operation (wrong tool, nothing declared); otherwise the evidence is
// returned, inconclusive when the probe could not tell (errors included:
// a failed probe proves nothing).
type Probe interface {
	Name() string
	Probe(ctx context.Context, run Run, op pipeline.WallOperation) (ev pipeline.Evidence, ok bool)
}

// WallScoped is a Probe that holds resources across the operations of one
// wall (the MCP probe's connections): ForWall returns the probe to use for
// that wall and the func that releases what it opened.
type WallScoped interface {
	Probe
	ForWall(run Run) (p Probe, done func())
}

// Set runs several probes.
type Set []Probe

// ForWall returns the set to probe one wall's operations with — WallScoped
// probes replaced by their per-wall instances — and the func that releases
// them; call it when the wall's operations are probed.
func (s Set) ForWall(run Run) (Set, func()) {
	out := make(Set, len(s))
	var dones []func()
	for i, p := range s {
		if ws, ok := p.(WallScoped); ok {
			wp, done := ws.ForWall(run)
			out[i], dones = wp, append(dones, done)
			continue
		}
		out[i] = p
	}
	return out, func() {
		for _, d := range dones {
			d()
		}
	}
}

// Probe returns the evidence of every applicable probe for op.
func (s Set) Probe(ctx context.Context, run Run, op pipeline.WallOperation) []pipeline.Evidence {
	var out []pipeline.Evidence
	for _, p := range s {
		if ev, ok := p.Probe(ctx, run, op); ok {
			out = append(out, ev)
		}
	}
	return out
}

// waited measures, on the run's database clock, the wait need since
// since: the journal's commit time of the call's tool.started. ok says it
// has passed; otherwise why says what is missing, and due (nil when it
// cannot be measured at all) when, on that clock, it will have passed.
func (r Run) waited(since *time.Time, need time.Duration) (el pipeline.Elapsed, ok bool, why string, due *time.Time) {
	switch {
	case since == nil:
		return el, false, "the journal's commit time of its tool.started is unknown, so no wait can be measured on the database's clock", nil
	case !r.Clock.Valid():
		return el, false, "the sweep read no database clock, so no wait can be measured on it", nil
	}
	el = r.Clock.Elapsed(*since, need)
	if el.Passed() {
		return el, true, "", nil
	}
	d := pipeline.Due(*since, need)
	return el, false, fmt.Sprintf("only %s of %s have passed since the journal took its tool.started (database clock; the sweeper's clock is %s off it, within %s)",
		el.At.Sub(el.Since).Round(time.Second), need, time.Duration(el.SkewMS)*time.Millisecond, time.Duration(el.SkewBoundMS)*time.Millisecond), &d
}

// withPreconditions is ev carrying pre.
func withPreconditions(ev pipeline.Evidence, pre pipeline.Preconditions) pipeline.Evidence {
	ev.Preconditions = &pre
	return ev
}

// evidence builds an Evidence with provenance marshalled from prov.
func evidence(probe, finding, detail string, at time.Time, prov any) pipeline.Evidence {
	var raw json.RawMessage
	if prov != nil {
		if b, err := json.Marshal(prov); err == nil {
			raw = b
		}
	}
	return pipeline.Evidence{Probe: probe, Finding: finding, Detail: detail, Provenance: raw, ObservedAt: at.UTC()}
}
