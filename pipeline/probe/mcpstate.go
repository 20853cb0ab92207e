package probe

import (
	"context"
	"encoding/json"
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
// TestMCPStateMemoryServer.
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
	prov := map[string]any{"tool": op.Tool, "answer": ans}
	inconclusive := func(format string, args ...any) (pipeline.Evidence, bool) {
		return evidence(MCPStateName, pipeline.FindingInconclusive, fmt.Sprintf(format, args...), at, prov), true
	}
	if err != nil {
		return inconclusive("reading the server's state failed: %v", err)
	}
	if ans.ReadOnly {
		return evidence(MCPAnnotationsName, pipeline.FindingNone,
			fmt.Sprintf("server %s, whose annotations the configuration trusts, marks %s readOnlyHint: the call does not modify its environment", ans.Server, op.Tool), at, prov), true
	}
	self, idx := startedOp(run, op.OperationID)
	if idx < 0 {
		return inconclusive("%s is not among the run's started operations", op.OperationID)
	}
	if p.Priors == nil {
		return inconclusive("no prior states are available to this probe")
	}
	prior, err := p.prior(ctx, run, op.OperationID)
	if err != nil {
		return inconclusive("the state recorded before %s: %v", op.OperationID, err)
	}
	prov["prior"] = prior
	grace := graceOr(p.Grace)
	// The comparison point: the prior state recorded before the run's
	// next write of any of the same facts (a re-issue), else now.
	against, cmpAt, cmp := "the server's state now", at, ans.Facts
	laterOther := ""
	for _, s := range run.Started[idx+1:] {
		name := strings.TrimPrefix(s.Tool, "mcp__")
		a, adapted := mcptool.AdapterFor(name, adaptedReads(s.Tool))
		if !adapted {
			if strings.HasPrefix(s.Tool, "mcp__") && laterOther == "" {
				laterOther = s.OperationID
			}
			continue
		}
		facts, err := a.Facts(name, s.Args)
		if err != nil {
			return inconclusive("the later write %s names no facts the probe can read: %v", s.OperationID, err)
		}
		if !sharesAny(facts, prior) {
			continue
		}
		next, ok, err := p.Priors.Get(ctx, run.Project, run.RunID, s.OperationID)
		if err != nil || !ok || next.Error != "" || len(next.State) == 0 {
			return inconclusive("the later write %s of the same facts has no recorded prior state to compare against", s.OperationID)
		}
		var f mcptool.Facts
		if json.Unmarshal(next.State, &f) != nil {
			return inconclusive("the prior state of the later write %s does not decode", s.OperationID)
		}
		against, cmpAt, cmp = "the state recorded before the later write "+s.OperationID, next.TakenAt, f
		break
	}
	if against == "the server's state now" && (op.State == "stale_in_flight" || !(run.Ended || op.State == "crash_window")) {
		return inconclusive("the run may still be running: a later write not yet in the journal could establish the same facts")
	}
	var landed, before []string
	for fact, was := range prior {
		now, known := cmp[fact]
		if !known {
			return inconclusive("the fact %q was not read at the comparison point", mcptool.FactString(fact))
		}
		switch {
		case was:
			before = append(before, mcptool.FactString(fact))
		case now:
			landed = append(landed, mcptool.FactString(fact))
		}
	}
	if len(landed) > 0 {
		return evidence(MCPStateName, pipeline.FindingOccurred,
			fmt.Sprintf("server %s (%s): %s held neither before %s nor after it until %s, and holds there: the call was applied", ans.Server, ans.Adapter, strings.Join(landed, "; "), op.OperationID, against), at, prov), true
	}
	if len(before) > 0 {
		return inconclusive("%s already held before the call, so its presence says nothing about %s", strings.Join(before, "; "), op.OperationID)
	}
	if laterOther != "" && against == "the server's state now" {
		// A later call the probe has no adapter for (delete_entities,
		// say) could have removed what this one created.
		return inconclusive("none of the call's facts holds now, but the later MCP call %s could have removed them", laterOther)
	}
	if done := self.StartedAt.Add(grace); !self.Answered && cmpAt.Before(done) {
		ev, ok := inconclusive("none of the call's facts holds in %s, but the call may still arrive until %s", against, done.UTC().Format(time.RFC3339))
		if against == "the server's state now" {
			ev.RecheckAfter = &done
		}
		return ev, ok
	}
	return evidence(MCPStateName, pipeline.FindingNone,
		fmt.Sprintf("server %s (%s): none of the facts of %s held before it or in %s, and the call can no longer arrive: it was not applied", ans.Server, ans.Adapter, op.OperationID, against), at, prov), true
}

// sharesAny reports whether any of facts is among have's.
func sharesAny(facts []string, have mcptool.Facts) bool {
	for _, f := range facts {
		if _, ok := have[f]; ok {
			return true
		}
	}
	return false
}

// prior returns the facts recorded before opID.
func (p MCP) prior(ctx context.Context, run Run, opID string) (mcptool.Facts, error) {
	pr, ok, err := p.Priors.Get(ctx, run.Project, run.RunID, opID)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("none was recorded")
	case pr.Error != "":
		return nil, fmt.Errorf("the kernel could not read it: %s", pr.Error)
	}
	var f mcptool.Facts
	if err := json.Unmarshal(pr.State, &f); err != nil || len(f) == 0 {
		return nil, fmt.Errorf("it does not decode as facts")
	}
	return f, nil
}

// adaptedReads pretends the server offers every read tool, so AdapterFor
// answers whether the write tool is adapted at all.
func adaptedReads(string) map[string]bool {
	out := map[string]bool{}
	for _, a := range mcptool.Adapters {
		for _, r := range a.Reads {
			out[r] = true
		}
	}
	return out
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
