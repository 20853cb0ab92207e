package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// Names of the MCP state probes in evidence.
const (
	MCPStateName       = "mcp.state"
	MCPAnnotationsName = "mcp.annotations"
)

// probeState settles a call to a server without lookup_operation.
//
// Adapted writes (tool/mcptool.Adapters: server-memory's create_entities,
// create_relations, add_observations): the facts the call would establish
// are read back with the server's own read tool and compared with the
// prior state the kernel recorded just before the call. A fact absent
// before and present at the comparison point proves occurred; every fact
// still absent proves none once the call can no longer arrive; a fact that
// held before proves nothing. The comparison point, and what a store
// shared beyond the run defeats: docs/internals.md#mcp-probes.
//
// Such a store is reachable by the server's every client: a fact another
// writer established (or removed) there would pass for this call's doing.
// Either finding therefore stands only for a server whose configuration
// declares its store exclusive to this project ("exclusive": true), the
// adapted facts carrying nothing only this call could have made; for any
// other server it is inconclusive, saying what it would have found
// (pipeline.Store). TestMCPStateMemoryServer.
//
// Trusted annotations. A tool the server marks readOnlyHint does not
// modify its environment, per the MCP specification; the finding is none
// only when the server's configuration says trust_annotations, since
// annotations from untrusted servers must not be relied on.
func (p MCP) probeState(ctx context.Context, sr StateReader, run Run, op pipeline.WallOperation, at time.Time) (pipeline.Evidence, bool) {
	if op.StartedKey.SourceID != kernel.SourceKernel {
		// The args are the agent's account of its call: not evidence of
		// what the call would have written.
		return pipeline.Evidence{}, false
	}
	ans, supported, err := sr.ReadState(ctx, run, op.MCPTarget(), op.Args)
	if !supported && err == nil {
		return pipeline.Evidence{}, false
	}
	sp := &stateProbe{p: p, run: run, op: op, at: at, ans: ans, prov: map[string]any{"tool": op.Tool, "server": ans.Server, "facts": ans.State.Facts}}
	switch {
	case errors.Is(err, ErrUnreachable):
		return evidence(MCPStateName, pipeline.FindingUnavailable, fmt.Sprintf("the server's state could not be read now: %v", err), at, sp.prov), true
	case err != nil:
		return sp.inconclusive("reading the server's state failed: %v", err)
	case ans.ReadOnly:
		return evidence(MCPAnnotationsName, pipeline.FindingNone,
			fmt.Sprintf("server %s, whose annotations the configuration trusts, marks %s readOnlyHint: the call does not modify its environment", ans.Server, op.Tool), at, sp.prov), true
	}
	ev, ok := sp.compare(ctx)
	return sp.attribute(ev), ok
}

// stateProbe is one operation's state probe on its way through
// probeState's steps.
type stateProbe struct {
	p    MCP
	run  Run
	op   pipeline.WallOperation
	at   time.Time
	ans  StateAnswer
	prov map[string]any
	self StartedOp
	idx  int
}

func (sp *stateProbe) inconclusive(format string, args ...any) (pipeline.Evidence, bool) {
	return evidence(MCPStateName, pipeline.FindingInconclusive, fmt.Sprintf(format, args...), sp.at, sp.prov), true
}

// comparison is the point a call's facts are compared at.
type comparison struct {
	// against names it for a detail.
	against string
	// state is what was read there.
	state mcptool.State
	// later is the run's later write the comparison is the prior state
	// of, nil for the server's state now.
	later *StartedOp
}

// compare reads what the facts' prior state and the comparison point
// prove of the call, before attribution.
func (sp *stateProbe) compare(ctx context.Context) (pipeline.Evidence, bool) {
	op := sp.op
	sp.self, sp.idx = startedOp(sp.run, op.OperationID)
	if sp.idx < 0 {
		return sp.inconclusive("%s is not among the run's started operations", op.OperationID)
	}
	if sp.p.Priors == nil {
		return sp.inconclusive("no prior states are available to this probe")
	}
	prior, err := sp.p.prior(ctx, sp.run, op.OperationID)
	if err != nil {
		return sp.inconclusive("the state recorded before %s: %v", op.OperationID, err)
	}
	sp.prov["prior"] = prior.Facts
	cmp, ev, stop := sp.comparisonPoint(ctx, prior)
	if stop {
		return ev, true
	}
	landed, before, ev, stop := sp.diff(prior, cmp)
	if stop {
		return ev, true
	}
	ans := sp.ans
	if len(landed) > 0 {
		return evidence(MCPStateName, pipeline.FindingOccurred,
			fmt.Sprintf("server %s (%s contracts): %s held neither before %s nor after it until %s, and holds there: the call was applied", ans.Server, ans.Contracts, strings.Join(landed, "; "), op.OperationID, cmp.against), sp.at, sp.prov), true
	}
	if len(before) > 0 {
		return sp.inconclusive("%s already held before the call, so its presence says nothing about %s", strings.Join(before, "; "), op.OperationID)
	}
	return sp.absent(cmp)
}

// comparisonPoint is the prior state recorded before the run's next call
// to the server that is not a declared read (a later write a contract
// checks, its prior state read after this call), else the server's state
// now once the run can call nothing more; stop says the probe answers ev
// instead. A later call no contract checks could have changed what the
// contracts read, so it leaves the probe inconclusive.
// TestContractLaterCalls.
func (sp *stateProbe) comparisonPoint(ctx context.Context, prior mcptool.State) (cmp comparison, ev pipeline.Evidence, stop bool) {
	r := sp.ans.resolved
	for _, s := range sp.run.Started[sp.idx+1:] {
		server, name, isMCP := splitMCP(s.Tool)
		if !isMCP || server != "" && server != sp.ans.Server || r.IsRead(name) {
			continue
		}
		if !r.Checks(name) {
			ev, _ = sp.inconclusive("the later MCP call %s (%s), which no contract checks, could have changed what the contracts read", s.OperationID, kernel.Printable(s.Tool))
			return cmp, ev, true
		}
		next, ok, err := sp.p.Priors.Get(ctx, sp.run.Project, sp.run.RunID, s.OperationID)
		if err != nil || !ok || next.Error != "" || len(next.State) == 0 {
			ev, _ = sp.inconclusive("the later write %s has no recorded prior state to compare against", s.OperationID)
			return cmp, ev, true
		}
		var st mcptool.State
		if json.Unmarshal(next.State, &st) != nil {
			ev, _ = sp.inconclusive("the prior state of the later write %s does not decode", s.OperationID)
			return cmp, ev, true
		}
		later := s
		return comparison{against: "the state recorded before the later write " + s.OperationID, state: st, later: &later}, ev, false
	}
	if sp.op.State == "stale_in_flight" || !(sp.run.Ended || sp.op.State == "crash_window") {
		ev, _ = sp.inconclusive("the run may still be running: a later write not yet in the journal could change the same state")
		return cmp, ev, true
	}
	return comparison{against: "the server's state now", state: sp.ans.State}, ev, false
}

// splitMCP splits mcp__<tool> or mcp__<server>__<tool>.
func splitMCP(tool string) (server, name string, ok bool) {
	name, ok = strings.CutPrefix(tool, "mcp__")
	if s, n, named := strings.Cut(name, "__"); named {
		return s, n, ok
	}
	return "", name, ok
}

// diff sorts the call's facts into those that landed (false before, true
// at the comparison point) and those that held before.
func (sp *stateProbe) diff(prior mcptool.State, cmp comparison) (landed, before []string, ev pipeline.Evidence, stop bool) {
	for _, fact := range prior.Facts.Names() {
		now, known := cmp.state.Holds(fact)
		if !known {
			ev, _ = sp.inconclusive("the fact %s was not read at the comparison point", mcptool.FactString(fact))
			return nil, nil, ev, true
		}
		switch {
		case prior.Facts[fact]:
			before = append(before, mcptool.FactString(fact))
		case now:
			landed = append(landed, mcptool.FactString(fact))
		}
	}
	return landed, before, ev, false
}

// absent is what no fact of the call holding at the comparison point
// proves: none once the call can no longer arrive there. Against a later
// write's prior state, that state was read after the later write's
// tool.started: both ends on the workflow's clock. Against the state now,
// the wait runs on the database's clock.
func (sp *stateProbe) absent(cmp comparison) (pipeline.Evidence, bool) {
	op, self, ans := sp.op, sp.self, sp.ans
	pre := pipeline.Preconditions{Answered: self.Answered}
	if !self.Answered {
		grace := graceOr(sp.p.Grace)
		if cmp.later != nil {
			el := pipeline.WorkflowElapsed(self.StartedAt, cmp.later.StartedAt, grace)
			if self.StartedAt.IsZero() || cmp.later.StartedAt.IsZero() || !el.Passed() {
				return sp.inconclusive("none of the call's facts holds in %s, but the call could still have arrived after it was read (less than %s after %s started, workflow clock)", cmp.against, grace, op.OperationID)
			}
			pre.Elapsed = &el
		} else {
			el, passed, why, due := sp.run.waited(op.JournaledAt, grace)
			if !passed {
				ev, ok := sp.inconclusive("none of the call's facts holds in %s, but the call may still arrive: %s", cmp.against, why)
				ev.RecheckAfter = due
				return ev, ok
			}
			pre.Elapsed = &el
		}
	}
	ev := evidence(MCPStateName, pipeline.FindingNone,
		fmt.Sprintf("server %s (%s contracts): none of the facts of %s held before it or in %s, and the call can no longer arrive: it was not applied", ans.Server, ans.Contracts, op.OperationID, cmp.against), sp.at, sp.prov)
	return withPreconditions(ev, pre), true
}

// attribute lets a decisive finding stand only where the store's state
// can be credited to the call (pipeline.Store): the server's store is
// declared exclusive to this project. Otherwise it is inconclusive,
// saying what it would have been, and no later sweep is waited for: time
// makes such a store no more the call's.
func (sp *stateProbe) attribute(ev pipeline.Evidence) pipeline.Evidence {
	st := pipeline.Store{Server: sp.ans.Server, Exclusive: sp.ans.Exclusive}
	decisive := ev.Finding == pipeline.FindingOccurred || ev.Finding == pipeline.FindingNone
	switch {
	case st.Attributable() && decisive:
		pre := pipeline.Preconditions{}
		if ev.Preconditions != nil {
			pre = *ev.Preconditions
		}
		pre.Store = &st
		return withPreconditions(ev, pre)
	case st.Attributable():
		return ev
	case !decisive:
		ev.RecheckAfter = nil
		return ev
	}
	return evidence(MCPStateName, pipeline.FindingInconclusive, fmt.Sprintf(
		"the state would prove %s (%s), but server %s's store can be written by its other clients and the facts carry nothing only this call could have made: another writer could have done it; declare the store \"exclusive\": true in RECKON_MCP_SERVERS if only this project writes it",
		ev.Finding, ev.Detail, sp.ans.Server), sp.at, sp.prov)
}

// prior returns the state recorded before opID.
func (p MCP) prior(ctx context.Context, run Run, opID string) (mcptool.State, error) {
	pr, ok, err := p.Priors.Get(ctx, run.Project, run.RunID, opID)
	switch {
	case err != nil:
		return mcptool.State{}, err
	case !ok:
		return mcptool.State{}, fmt.Errorf("none was recorded")
	case pr.Error != "":
		return mcptool.State{}, fmt.Errorf("the kernel could not read it: %s", pr.Error)
	}
	var st mcptool.State
	if err := json.Unmarshal(pr.State, &st); err != nil || len(st.Facts) == 0 {
		return mcptool.State{}, fmt.Errorf("it does not decode as a contract's state")
	}
	return st, nil
}

// startedOp returns the run's started operation opID and its index (-1
// when absent).
func startedOp(run Run, opID string) (StartedOp, int) {
	for i, s := range run.Started {
		if s.OperationID == opID {
			return s, i
		}
	}
	return StartedOp{}, -1
}
