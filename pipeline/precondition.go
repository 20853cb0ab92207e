package pipeline

import (
	"fmt"
	"time"
)

// Preconditions of a proof.
//
// A probe's decisive finding proves an effect only together with what it
// rests on beyond the state it read. This file is the one place those
// preconditions are stated and checked: the probes record them on their
// evidence (pipeline/probe), supervisor.Prove rejects a finding whose
// preconditions are missing or unmet (so the built-in supervisor,
// validation and settlement all reject it), and a probe contract declared
// for any MCP server reuses them instead of restating them:
//
//  1. Observed after the start. A finding observed before the operation
//     started says nothing of it (ObservedAfterStart).
//  2. One clock. A finding that rests on time having passed ("the call
//     can no longer arrive", "past its timeout plus a minute") carries
//     that measurement (Elapsed), with both ends read on one clock: the
//     database's (the journal's commit time of the call's tool.started,
//     and the database's clock as the sweeper read it with the run, the
//     sweeper's own skew from it bounded and recorded), or the workflow's
//     (two events the kernel wrote for one run). Never a timestamp one
//     machine wrote against another machine's clock.
//  3. An attributable state. A state read from a store other writers can
//     reach (an MCP server's store, a database) credits a change to this
//     call only when the change carries something unique to it (its
//     idempotency key, an id only it could create) or when the operator
//     declared the store exclusive to this project ("exclusive": true in
//     the server's RECKON_MCP_SERVERS entry). Store says which.
//
// What each probe's findings must carry is the table findingNeeds, keyed
// by probe name and finding, never by what the evidence says of itself: a
// finding recorded before these preconditions existed carries none of
// them and is rejected where one is needed.

// Clocks an Elapsed can be measured on.
const (
	// ClockDatabase: the journal's commit times and the database's clock
	// as the sweeper read it (Clock).
	ClockDatabase = "database"
	// ClockWorkflow: the times of events the kernel wrote for one run, all
	// from its workflow's clock (the Temporal server's).
	ClockWorkflow = "workflow"
)

// Preconditions are what a decisive finding rests on beyond the state its
// probe read.
type Preconditions struct {
	// Elapsed is the measurement of a finding that rests on time having
	// passed since the call started.
	Elapsed *Elapsed `json:"elapsed,omitempty"`
	// Answered says the kernel's worker answered for the call
	// (tool.completed, tool.blocked, or a tool.failed other than
	// activity_failed): it can no longer act, whatever the time, so the
	// finding needs no Elapsed.
	Answered bool `json:"answered,omitempty"`
	// Store says whom the state the probe read can be credited to.
	Store *Store `json:"store,omitempty"`
}

// Elapsed is a wait measured on one clock: At - Since is at least how long
// has passed between the call's start and the probe's reading.
type Elapsed struct {
	// Clock is ClockDatabase or ClockWorkflow.
	Clock string `json:"clock"`
	// Since is the call's start on that clock: the journal's commit time
	// of its tool.started (database), or its tool.started's time
	// (workflow).
	Since time.Time `json:"since"`
	// At is the reading on that clock, at its earliest.
	At time.Time `json:"at"`
	// NeedMS is the wait the finding needs, in milliseconds.
	NeedMS int64 `json:"need_ms"`
	// SkewMS is the sweeper's clock minus the database's, as measured
	// when the run was read, and SkewBoundMS how far that measurement may
	// be off (half the read's round trip). Recorded for the database
	// clock; At already allows for the bound.
	SkewMS      int64 `json:"skew_ms,omitempty"`
	SkewBoundMS int64 `json:"skew_bound_ms,omitempty"`
}

// Need is the wait the finding needs.
func (e Elapsed) Need() time.Duration { return time.Duration(e.NeedMS) * time.Millisecond }

// Passed reports whether the wait has passed.
func (e Elapsed) Passed() bool { return e.At.Sub(e.Since) >= e.Need() }

// Store says whom a state read from a store can be credited to.
type Store struct {
	// Server names the store's server.
	Server string `json:"server"`
	// Exclusive says the operator declared the store exclusive to this
	// project in the server's configuration.
	Exclusive bool `json:"exclusive,omitempty"`
	// CallUnique names what in the state only this call could have made
	// (its idempotency key, an id only it could create); "" when nothing
	// does.
	CallUnique string `json:"call_unique,omitempty"`
}

// Attributable reports whether the store's state can be credited to the
// call: something in it unique to the call, or a store no one else
// writes.
func (s Store) Attributable() bool { return s.Exclusive || s.CallUnique != "" }

// Clock is the database's clock as the sweeper read it with a run: every
// time-based proof of the run's operations is measured on it (Now), never
// on the sweeper's own clock against a time another machine wrote.
type Clock struct {
	// Read is the database's clock (clock_timestamp()) during the run's
	// read.
	Read time.Time `json:"read"`
	// Before and After are the sweeper's clock just before the read was
	// sent and once its answer came: the database read its clock in
	// between.
	Before time.Time `json:"before"`
	After  time.Time `json:"after"`
	// Local is the sweeper's clock; nil means time.Now.
	Local func() time.Time `json:"-"`
}

// Valid reports whether the clock was read.
func (c Clock) Valid() bool {
	return !c.Read.IsZero() && !c.Before.IsZero() && !c.After.Before(c.Before)
}

func (c Clock) local() time.Time {
	if c.Local != nil {
		return c.Local()
	}
	return time.Now()
}

// Now is the database's clock now, at its earliest: the sweeper's time
// since the read's answer came, added to the database's reading.
func (c Clock) Now() time.Time { return c.Read.Add(c.local().Sub(c.After)).UTC() }

// Skew is the sweeper's clock minus the database's, and Bound how far the
// measurement may be off.
func (c Clock) Skew() time.Duration {
	return c.Before.Add(c.After.Sub(c.Before) / 2).Sub(c.Read)
}

// Bound is half the read's round trip: the database read its clock then.
func (c Clock) Bound() time.Duration { return c.After.Sub(c.Before) / 2 }

// Elapsed measures the wait need since since, a time on the database's
// clock (the journal's commit time of the call's tool.started), at the
// clock's Now.
func (c Clock) Elapsed(since time.Time, need time.Duration) Elapsed {
	return Elapsed{
		Clock: ClockDatabase, Since: since.UTC(), At: c.Now(), NeedMS: need.Milliseconds(),
		SkewMS: c.Skew().Milliseconds(), SkewBoundMS: c.Bound().Milliseconds(),
	}
}

// Due is when, on the database's clock, need has passed since since.
func Due(since time.Time, need time.Duration) time.Time { return since.Add(need).UTC() }

// WorkflowElapsed measures the wait need between two times the kernel
// wrote for one run (its events' times, the workflow's clock).
func WorkflowElapsed(since, at time.Time, need time.Duration) Elapsed {
	return Elapsed{Clock: ClockWorkflow, Since: since.UTC(), At: at.UTC(), NeedMS: need.Milliseconds()}
}

// Needs says which preconditions a decisive finding must carry.
type Needs struct {
	// Elapsed: a measured wait that has passed, or Answered.
	Elapsed bool
	// Store: an attributable store.
	Store bool
}

// findingNeeds is what each probe's decisive findings rest on, by probe
// name (pipeline/probe's names; TestFindingNeedsNameEveryProbe holds them
// together) and finding:
//
//   - mcp.lookup_operation: completed names the call's own idempotency key
//     (call-unique); never_seen proves none only once the call can no
//     longer arrive.
//   - mcp.state: a store the server's other clients reach; none also
//     needs the call to be unable to arrive.
//   - mcp.annotations: the server's own word, under trust_annotations.
//   - workspace.postcondition, workspace.diff: the kernel's workspace of
//     the run, which only the run's sandboxed calls write; absence proves
//     none only once the call can no longer act.
//   - journal.child_run: the kernel's journal of the child run.
var findingNeeds = map[string]map[string]Needs{
	"mcp.lookup_operation":    {FindingOccurred: {}, FindingNone: {Elapsed: true}},
	"mcp.state":               {FindingOccurred: {Store: true}, FindingNone: {Elapsed: true, Store: true}},
	"mcp.annotations":         {FindingNone: {}},
	"workspace.postcondition": {FindingOccurred: {}, FindingNone: {Elapsed: true}},
	"workspace.diff":          {FindingOccurred: {}, FindingNone: {Elapsed: true}},
	"journal.child_run":       {FindingOccurred: {}, FindingNone: {}},
}

// NeedsOf returns what a decisive finding of probe must carry. A probe not
// in the table (a probe contract declared later) reads state someone else
// may write and decides none from absence: its occurred needs an
// attributable store, its none a wait that has passed.
func NeedsOf(probe, finding string) Needs {
	if n, ok := findingNeeds[probe][finding]; ok {
		return n
	}
	return Needs{Elapsed: finding == FindingNone, Store: finding == FindingOccurred}
}

// KnownProbes lists the probes of the table, for the test that holds it to
// pipeline/probe's names.
func KnownProbes() []string {
	out := make([]string, 0, len(findingNeeds))
	for p := range findingNeeds {
		out = append(out, p)
	}
	return out
}

// Unmet says why a decisive finding on op does not prove its effect, ""
// when its preconditions hold (and for a finding that is not decisive).
func Unmet(op WallOperation, ev Evidence) string {
	if ev.Finding != FindingOccurred && ev.Finding != FindingNone {
		return ""
	}
	if why := ObservedAfterStart(op, ev); why != "" {
		return why
	}
	need := NeedsOf(ev.Probe, ev.Finding)
	pre := ev.Preconditions
	if pre == nil {
		pre = &Preconditions{}
	}
	if need.Elapsed && !pre.Answered {
		if why := elapsedUnmet(op, pre.Elapsed); why != "" {
			return why
		}
	}
	if need.Store {
		switch s := pre.Store; {
		case s == nil:
			return "it read a store other writers can reach and says nothing of whom the state can be credited to"
		case !s.Attributable():
			return fmt.Sprintf("it read the store of server %q, which other writers can reach, and the state carries nothing unique to this call (the store is not declared exclusive)", s.Server)
		}
	}
	return ""
}

// ObservedAfterStart says why ev, observed before op started, proves
// nothing of it ("" when it was observed at or after the start). The start
// is the journal's commit time of the operation's tool.started where the
// wall has it (the clock the probes read on), its tool.started's time
// otherwise.
func ObservedAfterStart(op WallOperation, ev Evidence) string {
	start, which := op.StartedAt, "its tool.started's time"
	if op.JournaledAt != nil {
		start, which = *op.JournaledAt, "the journal's commit time of its tool.started"
	}
	switch {
	case ev.ObservedAt.IsZero():
		return "it does not say when it was observed, so it may predate the operation"
	case ev.ObservedAt.Before(start):
		return fmt.Sprintf("it was observed at %s, before the operation started (%s, %s)",
			ev.ObservedAt.UTC().Format(time.RFC3339Nano), start.UTC().Format(time.RFC3339Nano), which)
	}
	return ""
}

// elapsedUnmet says why e does not show the wait a finding on op needs.
func elapsedUnmet(op WallOperation, e *Elapsed) string {
	if e == nil {
		return "it rests on time having passed since the call started, and carries no measurement of it on one clock"
	}
	switch e.Clock {
	case ClockDatabase:
		if op.JournaledAt == nil || e.Since.Before(*op.JournaledAt) {
			return "its wait is measured from a time on the database's clock that is not the journal's commit time of the operation's tool.started"
		}
	case ClockWorkflow:
		if e.Since.Before(op.StartedAt) {
			return "its wait is measured from a time before the operation's tool.started"
		}
	default:
		return fmt.Sprintf("its wait is measured on clock %q, not on one clock (database or workflow)", e.Clock)
	}
	if !e.Passed() {
		return fmt.Sprintf("only %s of the %s it needs had passed on the %s clock", e.At.Sub(e.Since).Round(time.Second), e.Need(), e.Clock)
	}
	return ""
}
