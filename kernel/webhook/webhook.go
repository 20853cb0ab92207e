// Package webhook is reckon's webhooks: JSON notifications of the facts
// an operator acts on, signed after the Standard Webhooks convention and
// delivered at least once (docs/api.md#webhooks,
// docs/production.md#webhooks).
//
// A notification is written in the transaction of the fact it announces,
// as rows of webhook_deliveries, one per endpoint that asked for its event
// (webhook_endpoints, registered by the delivering process from
// RECKON_WEBHOOKS):
//
//   - attention and settled: an operation.reconciled, written by the
//     outbox's Enqueue in the transaction that enqueues it (an operator's
//     ruling, a triage wall), derived here from the events (Derive);
//   - run.awaiting: a kernel run's run.awaiting, enqueued the same way by
//     the run's worker;
//   - conflict.parked: the publisher's park of an outbox row, in the
//     transaction that parks it (Parked).
//
// Every event reckon writes itself goes through the outbox, so deriving
// the notifications there announces each such fact whoever writes it,
// with nothing for a new writer to remember. The Deliverer (deliver.go)
// drains the rows: claimed with FOR UPDATE SKIP LOCKED under a lease, so
// several deliverers in several processes never send a row at once,
// retried with capped exponential backoff and jitter until the receiver
// answers 2xx. A retry and every endpoint of one fact carry the
// same webhook-id; a receiver deduplicates by it.
package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// The events an endpoint may ask for (config.WebhookEvents).
const (
	// EventAttention: an operation entered the operator's queue (the
	// supervisor recorded effect unknown, or its verdict asked for a
	// person to look).
	EventAttention = "attention"
	// EventSettled: any other reconciliation, an operator's ruling or the
	// supervisor's.
	EventSettled = "settled"
	// EventRunAwaiting: a kernel run stopped to wait for the settlement of
	// an operation.
	EventRunAwaiting = "run.awaiting"
	// EventConflictParked: the publisher parked an outbox row on a
	// conflict; its event will never reach the journal on its own.
	EventConflictParked = "conflict.parked"
)

// Events lists the events, in the order docs/api.md gives them.
var Events = []string{EventAttention, EventSettled, EventRunAwaiting, EventConflictParked}

// Reasons of an attention notification, as the operator's queue gives
// them (operations.ReasonUnknown, operations.ReasonVerdictNeedsAttention).
const (
	reasonUnknown        = "unknown"
	reasonVerdictPending = "verdict_needs_attention"
)

// Notification is one notification, to every endpoint that asked for its
// event.
type Notification struct {
	// Event is one of Events.
	Event string
	// MsgID is the webhook-id: derived from the fact, so the same fact
	// written twice is the same message.
	MsgID string
	// Body is the JSON sent, byte for byte what is signed.
	Body []byte
	// Key is the event the notification announces (for conflict.parked,
	// the parked row's); Digest, when set, is that event's payload digest
	// as the outbox stores it: the notification is written only while the
	// outbox holds exactly that event under Key (Queue).
	Key    kernel.EventKey
	Digest []byte
}

// Payload is the body of every notification: the Standard Webhooks
// envelope (type, timestamp, data) and a Slack-compatible text, so that
// an incoming-webhook URL works as it is.
type Payload struct {
	Type string `json:"type"`
	// Timestamp is when the fact happened (the event's time), not when
	// this attempt was made (the webhook-timestamp header).
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
	Text      string    `json:"text"`
}

// OperationData is the data of attention and settled.
type OperationData struct {
	Project     string `json:"project"`
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
	Effect      string `json:"effect"`
	// ProposedEffect is the supervisor's proposal the settlement policy
	// held back, on an attention for effect unknown.
	ProposedEffect string `json:"proposed_effect,omitempty"`
	Basis          string `json:"basis"`
	Actor          string `json:"actor"`
	Note           string `json:"note"`
	// Reason, on attention, is why the operation is in the queue: unknown
	// or verdict_needs_attention.
	Reason string `json:"reason,omitempty"`
	// Reconciliation is the operation.reconciled's key; Supersedes the
	// earlier one it overrides; Verdict the supervisor.verdict of the
	// wall that wrote it.
	Reconciliation kernel.EventKey  `json:"reconciliation"`
	Supersedes     *kernel.EventKey `json:"supersedes,omitempty"`
	Verdict        *kernel.EventKey `json:"verdict,omitempty"`
}

// AwaitingData is the data of run.awaiting.
type AwaitingData struct {
	Project     string `json:"project"`
	RunID       string `json:"run_id"`
	OperationID string `json:"operation_id"`
	// Until is when the wait ends in run.failed unless the operation is
	// settled first, when the run said.
	Until string          `json:"until,omitempty"`
	Event kernel.EventKey `json:"event"`
}

// ParkedData is the data of conflict.parked. Project, RunID and Type are
// the event's, empty for a row that holds no event.
type ParkedData struct {
	Event   kernel.EventKey `json:"event"`
	Project string          `json:"project,omitempty"`
	RunID   string          `json:"run_id,omitempty"`
	Type    string          `json:"type,omitempty"`
	Reason  string          `json:"reason"`
}

// Derive returns the notifications the events announce, in their order:
// attention or settled for each operation.reconciled, run.awaiting for
// each of the kernel's run.awaiting. Attention is a supervisor's
// reconciliation that says unknown, or one whose wall's verdict asked for
// attention: the verdict is enqueued with its reconciliations, in the same
// call, where Derive finds it. Other events announce nothing, and a batch
// without any costs one pass over the types.
func Derive(events []kernel.Event) ([]Notification, error) {
	if !announces(events) {
		return nil, nil
	}
	attention, err := attentionOperations(events)
	if err != nil {
		return nil, err
	}
	var out []Notification
	for _, ev := range events {
		var (
			n   Notification
			ok  bool
			err error
		)
		switch {
		case ev.Type == kernel.TypeOperationReconciled:
			n, err = reconciled(ev, attention)
			ok = true
		case ev.Type == kernel.TypeRunAwaiting && ev.SourceID == kernel.SourceKernel:
			n, err = awaiting(ev)
			ok = true
		}
		if err != nil {
			return nil, fmt.Errorf("webhook: %s %s: %w", ev.Type, ev.Key(), err)
		}
		if ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// announces reports whether an event of events announces anything.
func announces(events []kernel.Event) bool {
	for _, ev := range events {
		if ev.Type == kernel.TypeOperationReconciled || ev.Type == kernel.TypeRunAwaiting {
			return true
		}
	}
	return false
}

// opRef names an operation of a verdict.
type opRef struct{ project, runID, operationID string }

// attentionOperations are the operations of the events' verdicts that
// asked for attention, with each one's verdict.
func attentionOperations(events []kernel.Event) (map[opRef]kernel.EventKey, error) {
	out := map[opRef]kernel.EventKey{}
	for _, ev := range events {
		if ev.Type != kernel.TypeSupervisorVerdict {
			continue
		}
		var v kernel.Verdict
		if err := ev.DecodeData(&v); err != nil {
			return nil, fmt.Errorf("webhook: verdict %s: %w", ev.Key(), err)
		}
		if !v.NeedsAttention {
			continue
		}
		for _, op := range v.OperationIDs {
			out[opRef{ev.Project, ev.RunID, op}] = ev.Key()
		}
	}
	return out, nil
}

// reconciled is the notification of one operation.reconciled.
func reconciled(ev kernel.Event, attention map[opRef]kernel.EventKey) (Notification, error) {
	var r kernel.Reconciliation
	if err := ev.DecodeData(&r); err != nil {
		return Notification{}, err
	}
	d := OperationData{
		Project: ev.Project, RunID: ev.RunID, OperationID: r.OperationID,
		Effect: r.Effect, ProposedEffect: r.ProposedEffect, Basis: r.Basis, Actor: ev.Actor, Note: r.Note,
		Reconciliation: ev.Key(), Supersedes: r.Supersedes,
	}
	event := EventSettled
	if ev.Actor == kernel.ActorSupervisor {
		verdict, asked := attention[opRef{ev.Project, ev.RunID, r.OperationID}]
		if asked {
			d.Verdict = &verdict
		}
		switch {
		case r.Effect == kernel.EffectUnknown:
			event, d.Reason = EventAttention, reasonUnknown
		case asked:
			event, d.Reason = EventAttention, reasonVerdictPending
		}
	}
	return build(event, ev.Key(), ev.TS, d, operationText(event, d))
}

// awaiting is the notification of a kernel run.awaiting.
func awaiting(ev kernel.Event) (Notification, error) {
	var a struct {
		OperationID string `json:"operation_id"`
		Until       string `json:"until"`
	}
	if err := ev.DecodeData(&a); err != nil {
		return Notification{}, err
	}
	d := AwaitingData{Project: ev.Project, RunID: ev.RunID, OperationID: a.OperationID, Until: a.Until, Event: ev.Key()}
	text := fmt.Sprintf("reckon: run %s (project %s) is waiting for operation %s to be settled by a probe or an operator",
		code(d.RunID), code(d.Project), code(d.OperationID))
	if d.Until != "" {
		text += "; it fails at " + slack(d.Until) + " unless it is"
	}
	return build(EventRunAwaiting, ev.Key(), ev.TS, d, text+".")
}

// Parked is the notification of an outbox row parked at at: the key,
// project, run and type of its event (empty for a row that holds none)
// and the park's reason.
func Parked(d ParkedData, at time.Time) (Notification, error) {
	what := "an outbox row that holds no event"
	if d.Type != "" {
		what = fmt.Sprintf("%s %s of run %s (project %s)", code(d.Type), code(d.Event.String()), code(d.RunID), code(d.Project))
	}
	text := fmt.Sprintf("reckon: the outbox parked %s: %s. It will not reach the journal until an operator resolves it; `reckon outbox parked` lists it.",
		what, slack(kernel.TruncateUTF8(d.Reason, maxTextNote)))
	return build(EventConflictParked, d.Event, at, d, text)
}

// build is a notification: its id from the event and the fact's key, its
// body the Payload.
func build(event string, key kernel.EventKey, at time.Time, data any, text string) (Notification, error) {
	body, err := json.Marshal(Payload{Type: event, Timestamp: at.UTC(), Data: data, Text: text})
	if err != nil {
		return Notification{}, err
	}
	return Notification{Event: event, MsgID: msgID(event, key), Body: body, Key: key}, nil
}

// msgID is the webhook-id of event for the fact key: "msg_" and 32 hex
// digits of a digest, length-prefixed parts so that no two facts share
// it. Hex: the signed content is id.timestamp.body, and an id must not
// hold a dot.
func msgID(event string, key kernel.EventKey) string {
	h := sha256.New()
	for _, p := range []string{event, key.SourceID, key.EventID} {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return "msg_" + hex.EncodeToString(h.Sum(nil))[:32]
}

// maxTextNote bounds a note or reason quoted in text; data has it whole.
const maxTextNote = 300

// operationText is the text of attention and settled.
func operationText(event string, d OperationData) string {
	op := fmt.Sprintf("operation %s of run %s (project %s)", code(d.OperationID), code(d.RunID), code(d.Project))
	var b strings.Builder
	switch {
	case event == EventAttention && d.Reason == reasonUnknown:
		fmt.Fprintf(&b, "reckon: %s needs an operator: the supervisor could not establish its effect", op)
		if d.ProposedEffect != "" {
			fmt.Fprintf(&b, " (it proposed %s, which the settlement policy held back)", slack(d.ProposedEffect))
		}
	case event == EventAttention:
		fmt.Fprintf(&b, "reckon: %s needs an operator: the supervisor recorded effect %s and asked for a person to look", op, slack(d.Effect))
	default:
		fmt.Fprintf(&b, "reckon: %s is settled: effect %s (basis %s, by %s)", op, slack(d.Effect), slack(d.Basis), slack(d.Actor))
	}
	if d.Note != "" {
		fmt.Fprintf(&b, ". Note: %s", slack(kernel.TruncateUTF8(d.Note, maxTextNote)))
	}
	return b.String()
}

// slack escapes s for a Slack text field (&, <, >): ids and notes come
// from agents and models, and unescaped "<!channel>" would page a whole
// channel.
func slack(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// code is s escaped and set as inline code, backticks dropped so that it
// cannot end the span.
func code(s string) string {
	return "`" + slack(strings.ReplaceAll(s, "`", "'")) + "`"
}
