package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

// SignalSettled is the signal that tells a waiting run its operation may
// have been settled (Settled). It is only a nudge: the run reads the
// settlement from the journal itself (ActSettlement) and ignores a signal
// for another operation, a repeated one, and one the journal does not
// bear out.
const SignalSettled = "reckon.settled"

// ActSettlement reads the newest reconciliation of the operation a run
// waits for from the journal (a local activity).
const ActSettlement = "kernel.settlement"

// ChangeAwait is the workflow.GetVersion change id under which a step
// whose on_uncertain is "await" waits for its operation's settlement
// (version 1): run.awaiting, then the settled signal or the await bound.
// The version is asked only when such a wait would begin, so histories
// without one replay unchanged; at DefaultVersion the step stops the run,
// as every unknown on_uncertain did before.
const ChangeAwait = "await-settlement"

// DefaultAwaitTimeout is Timeouts.Await's default (RECKON_AWAIT_TIMEOUT).
const DefaultAwaitTimeout = 72 * time.Hour

// Settled is the payload of SignalSettled: the operation, and the
// reconciliation the sender saw settle it.
type Settled struct {
	OperationID    string          `json:"operation_id"`
	Reconciliation kernel.EventKey `json:"reconciliation"`
}

// SettlementQuery names the operation whose settlement ActSettlement reads.
type SettlementQuery struct {
	Project     string `json:"project"`
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
}

// Settlement is the newest operation.reconciled of an operation, as
// ActSettlement read it; Found is false when the journal holds none.
type Settlement struct {
	Found  bool            `json:"found"`
	Key    kernel.EventKey `json:"key"`
	Effect string          `json:"effect"`
	Basis  string          `json:"basis"`
	Actor  string          `json:"actor"`
	// Note and Evidence are the reconciliation's, for an agent's model
	// to be told what settled its call (AgentWorkflow).
	Note     string          `json:"note,omitempty"`
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

// Resumes reports whether the settlement ends a wait: only what a probe
// proved or an operator ruled does; a supervisor's inference, and its
// unknown, leave the run waiting for one of them.
func (s Settlement) Resumes() bool {
	return s.Found && (s.Basis == kernel.BasisProbe || s.Basis == kernel.BasisOperator)
}

// Settlement reads the newest reconciliation of an operation from the
// journal: the only settlement a waiting run acts on, whatever a signal
// said.
func (a *Activities) Settlement(ctx context.Context, q SettlementQuery) (Settlement, error) {
	evs, err := journal.OperationEvents(ctx, a.Pool, q.Project, q.RunID, q.OperationID)
	if err != nil {
		return Settlement{}, err
	}
	return newestSettlement(evs), nil
}

// newestSettlement is the newest operation.reconciled among evs by (ts,
// journal order), as the listing and the queue order reconciliations.
func newestSettlement(evs []journal.StoredEvent) Settlement {
	var newest *journal.StoredEvent
	for i, e := range evs {
		if e.Type != kernel.TypeOperationReconciled {
			continue
		}
		if newest == nil || e.TS.After(newest.TS) || (e.TS.Equal(newest.TS) && e.Seq > newest.Seq) {
			newest = &evs[i]
		}
	}
	if newest == nil {
		return Settlement{}
	}
	var d kernel.Reconciliation
	if err := newest.DecodeData(&d); err != nil {
		return Settlement{}
	}
	return Settlement{Found: true, Key: newest.Key(), Effect: d.Effect, Basis: d.Basis, Actor: newest.Actor, Note: d.Note, Evidence: d.Evidence}
}

// waitEnd is how a run's wait for a settlement ended.
type waitEnd struct {
	// settlement is the one that resumed the run (Resumes), when one did.
	settlement Settlement
	// timedOut: the await bound passed first.
	timedOut bool
}

// awaits reports whether a step that failed uncertain waits for its
// settlement: its on_uncertain says await, the run is not canceled, and
// the run's workflow version knows waiting (ChangeAwait).
func (r *run) awaits(ctx workflow.Context, s Step, res stepResult) bool {
	if res.OK || res.Effect != kernel.EffectUncertain || s.OnUncertain != OnUncertainAwait || ctx.Err() != nil {
		return false
	}
	return workflow.GetVersion(ctx, ChangeAwait, workflow.DefaultVersion, 1) == 1
}

// await records run.awaiting for opID and waits, durably, until a probe or
// an operator settles the operation (a SignalSettled the journal bears
// out), the await bound passes, or the run is canceled (ctx ends: the
// caller records that). The bound is Timeouts.Await from the run's input,
// so every replay sets the same timer. A settlement that resumes the run
// is recorded as run.resumed.
func (r *run) await(ctx workflow.Context, opID string) (waitEnd, error) {
	// To the microsecond, as the journal keeps an event's time.
	until := workflow.Now(ctx).Add(r.t.Await).UTC().Truncate(time.Microsecond)
	if err := r.record(ctx, kernel.TypeRunAwaiting, "run/awaiting/"+opID, kernel.RunAwaiting{
		OperationID: opID, Until: until.Format(time.RFC3339Nano),
	}); err != nil {
		return waitEnd{}, err
	}
	tctx, stopTimer := workflow.WithCancel(ctx)
	defer stopTimer()
	timer := workflow.NewTimer(tctx, r.t.Await)
	signals := workflow.GetSignalChannel(ctx, SignalSettled)
	for {
		var (
			sig   Settled
			fired bool
		)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &sig) })
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.Select(ctx)
		switch {
		case fired && ctx.Err() != nil:
			return waitEnd{}, nil // canceled: the timer ended with the run's context
		case fired:
			return waitEnd{timedOut: true}, nil
		case sig.OperationID != opID:
			continue // for an earlier wait of this run, or not for this run at all
		}
		s := r.settlement(ctx, opID)
		if !s.Resumes() {
			continue
		}
		err := r.record(ctx, kernel.TypeRunResumed, "run/resumed/"+opID, kernel.RunResumed{
			OperationID: opID, Effect: s.Effect, Reconciliation: &s.Key, Basis: s.Basis,
		})
		return waitEnd{settlement: s}, err
	}
}

// settlement reads opID's newest reconciliation through ActSettlement; a
// read that fails leaves the run waiting (the resumer signals again).
func (r *run) settlement(ctx workflow.Context, opID string) Settlement {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second, MaximumAttempts: 10,
		},
	})
	var s Settlement
	q := SettlementQuery{Project: r.in.Project, RunID: r.in.RunID, OperationID: opID}
	if err := workflow.ExecuteLocalActivity(lctx, ActSettlement, q).Get(ctx, &s); err != nil {
		workflow.GetLogger(ctx).Warn("settlement not read; waiting on", "operation_id", opID, "error", err)
		return Settlement{}
	}
	return s
}

// awaitFailure is run.failed's error for a wait that did not resume the
// step: the bound passed, or the settlement leaves nothing to go on with.
func awaitFailure(s Step, opID string, end waitEnd, bound time.Duration) string {
	if end.timedOut {
		return fmt.Sprintf("operation %s (%s) failed uncertain and was not settled by a probe or an operator within %s (RECKON_AWAIT_TIMEOUT); the run stops",
			opID, s.Tool, bound)
	}
	st := end.settlement
	if st.Effect == kernel.EffectNone {
		return fmt.Sprintf("operation %s (%s) was settled none (%s, %s) after its step had been issued again already; the run stops rather than issue it a third time",
			opID, s.Tool, st.Basis, st.Key)
	}
	return fmt.Sprintf("operation %s (%s) was settled %s by %s (%s): whether its effect happened is not known, so the run stops",
		opID, s.Tool, st.Effect, st.Actor, st.Key)
}
