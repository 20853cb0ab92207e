package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
)

// agentRun plays an external agent reporting its own run, as POST
// /v1/events takes it (the journal's guarded ingest for agents): it makes
// the agent's create_issue with a client of the agent's own — its own key,
// not reckon's — when the call lands, and reports tool.started, an
// uncertain tool.failed and the run's end either way. The drill made the
// call or did not: that is the operation's truth.
func (st *Stack) agentRun(ctx context.Context, project string, sc Scenario) error {
	a := sc.Agent
	args, err := json.Marshal(map[string]string{"title": a.Title, "body": "filed by the agent's own client"})
	if err != nil {
		return err
	}
	if a.Lands {
		if _, _, err := st.issueStore.CreateIssue(a.Source+":"+sc.RunID+":"+a.OperationID, a.Title, "filed by the agent's own client"); err != nil {
			return fmt.Errorf("run %s: the agent's call: %w", sc.RunID, err)
		}
	}
	at := time.Now().UTC()
	var evs []kernel.Event
	for i, e := range []struct {
		suffix, typ string
		data        any
	}{
		{"run/started", kernel.TypeRunStarted, kernel.RunStarted{PlanSummary: "file an issue"}},
		{a.OperationID + "/started", kernel.TypeToolStarted, kernel.ToolStarted{OperationID: a.OperationID, Tool: "mcp__create_issue", Args: args, Attempt: 1}},
		{a.OperationID + "/failed", kernel.TypeToolFailed, kernel.ToolFailed{OperationID: a.OperationID, ErrorType: "timeout",
			Error: "no answer from the server within 30s", Effect: kernel.EffectUncertain}},
		{"run/failed", kernel.TypeRunFailed, kernel.RunFailed{Error: "gave up after an uncertain call"}},
	} {
		ev, err := kernel.NewEvent(a.Source, sc.RunID+"/"+e.suffix, project, sc.RunID, e.typ, kernel.ActorAgent, at.Add(time.Duration(i)*time.Millisecond), e.data)
		if err != nil {
			return fmt.Errorf("run %s: the agent's %s: %w", sc.RunID, e.typ, err)
		}
		evs = append(evs, ev)
	}
	res, err := st.Core.Journal.IngestAgentEvents(ctx, evs)
	if err != nil {
		return fmt.Errorf("run %s: ingest the agent's events: %w", sc.RunID, err)
	}
	for _, r := range res {
		if r.Status != kernel.StatusAccepted {
			return fmt.Errorf("run %s: the agent's event %s: %s %s", sc.RunID, r.EventID, r.Status, r.Reason)
		}
	}
	truth, did := kernel.EffectNone, "never sent the call"
	if a.Lands {
		truth, did = kernel.EffectOccurred, "filed the issue with the agent's own client"
	}
	detail, _ := json.Marshal(map[string]string{"observed": "the drill, in the agent's place, " + did})
	return fault.RecordObserved(ctx, st.Core.Pool, fault.Record{
		Project: project, RunID: sc.RunID, OperationID: a.OperationID, Tool: "mcp__create_issue",
		Fault: fault.Observed, Truth: truth, Detail: detail,
	})
}
