package gateway

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// Guard is the retry guard the gateway asks before it sends a call
// (*operations.Service).
type Guard interface {
	Guard(ctx context.Context, p operations.GuardParams) (operations.GuardAnswer, error)
}

// guardTimeout bounds the guard's answer; past it the call is refused, not
// sent unguarded.
const guardTimeout = 10 * time.Second

// guarded reports whether the guard applies to t: not to a tool its
// upstream annotates readOnlyHint or idempotentHint (repeating it cannot
// repeat an effect), nor to one RECKON_GUARD_EXEMPT names.
func (g *Gateway) guarded(t *tool) bool {
	if a := t.def.Annotations; a != nil && (a.ReadOnlyHint || a.IdempotentHint) {
		return false
	}
	return !slices.Contains(g.o.GuardExempt, t.def.Name)
}

// guard asks the retry guard about c before anything is recorded or sent
// (TestGatewayGuard). On hold and on done the call is not sent: it is
// journaled as its own operation, tool.started then tool.blocked naming
// the earlier one, and the client is told why; a hold also asks for a
// triage of the earlier operation's run now. nil lets the call go on as a
// new operation.
func (g *Gateway) guard(ctx context.Context, c *gatewayCall) (*mcp.CallToolResult, error) {
	if g.o.Guard == nil || !g.guarded(c.t) {
		return nil, nil
	}
	gctx, cancel := context.WithTimeout(ctx, guardTimeout)
	ans, err := g.o.Guard.Guard(gctx, operations.GuardParams{Project: c.run.project, RunID: c.run.runID, Tool: c.served, Args: c.args})
	cancel()
	switch {
	case kernel.ErrorCode(err) == kernel.EInvalid:
		return nil, nil // arguments begin refuses, naming the fault
	case err != nil:
		g.log.Error().Err(err).Str("run_id", c.run.runID).Str("tool", c.t.def.Name).Msg("mcp gateway: retry guard not answered; call refused")
		return gatewayError("mcp-gateway could not check for an identical earlier call, so this call was neither recorded nor sent upstream; call again shortly: " + oneLine(err)), nil
	case ans.Decision == operations.GuardProceed || ans.Operation == nil:
		return nil, nil
	}
	if refused, err := g.begin(ctx, c); refused != nil || err != nil {
		return refused, err
	}
	earlier := ans.Operation
	name := fmt.Sprintf("operation %s of run %s", earlier.OperationID, earlier.RunID)
	reason := "held by the retry guard: " + name + " has the same tool and arguments and is unsettled"
	if ans.Decision == operations.GuardDone {
		reason = "answered by the retry guard: " + name + " has the same tool and arguments and was settled occurred"
	}
	log := g.log.With().Str("run_id", c.run.runID).Str("operation_id", c.opID).Str("tool", c.t.def.Name).Logger()
	ev, err := g.event(c.run.runID, kernel.TypeToolBlocked, c.opID+"/blocked", kernel.ToolBlocked{OperationID: c.opID, Reason: reason,
		Guard: ans.Decision, EarlierRunID: earlier.RunID, EarlierOperationID: earlier.OperationID})
	recorded := err == nil && g.record(ctx, ev, log)
	c.s.closed(c.run.runID, c.opID, recorded)
	if ans.Decision == operations.GuardDone {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: doneText(ans, name, c.opID)}}}, nil
	}
	if g.o.Triage != nil {
		g.o.Triage(context.WithoutCancel(ctx), earlier.Project, earlier.RunID)
	}
	return gatewayError(fmt.Sprintf("mcp-gateway did not send this call: an identical earlier call (%s: the same tool and arguments) "+
		"may already have had this effect, and reckon is reconciling it. Do not retry this call now: wait for the earlier call's verdict, "+
		"or ask an operator to reconcile %s (reckon ops history --project %s --run %s --op %s). This call is recorded as operation %s, blocked.",
		name, earlier.OperationID, earlier.Project, earlier.RunID, earlier.OperationID, c.opID)), nil
}

// doneText tells the client that the call's effect already happened: the
// earlier operation, and who settled it on what basis.
func doneText(ans operations.GuardAnswer, name, opID string) string {
	var d kernel.Reconciliation
	who := ""
	if r := ans.Reconciliation; r != nil {
		_ = r.DecodeData(&d)
		who = " (decided by " + r.Actor
		if d.Basis != "" {
			who += ", basis " + d.Basis
		}
		who += ")"
		if d.Note != "" {
			who += ": " + d.Note
		}
	}
	return fmt.Sprintf("mcp-gateway did not send this call: this effect already happened. An identical earlier call (%s: the same tool and arguments) "+
		"was settled \"occurred\"%s. Do not repeat it. This call is recorded as operation %s, blocked.", name, who, opID)
}
