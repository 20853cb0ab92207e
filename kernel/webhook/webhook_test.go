package webhook_test

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/webhook"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

// TestMain fails the package's tests when they leave goroutines running.
func TestMain(m *testing.M) { reckontest.Main(m) }

// TestSignMatchesTheConvention: the signature of the Standard Webhooks
// reference libraries' test vector (whsec_ key, id, timestamp, body).
func TestSignMatchesTheConvention(t *testing.T) {
	t.Parallel()
	key, err := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhook.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

// TestEventsMatchTheConfiguration: the events config accepts are the
// events the package announces.
func TestEventsMatchTheConfiguration(t *testing.T) {
	t.Parallel()
	if !slices.Equal(webhook.Events, config.WebhookEvents) {
		t.Fatalf("webhook.Events %v, config.WebhookEvents %v", webhook.Events, config.WebhookEvents)
	}
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func reconciliation(t *testing.T, op, actor, effect, basis, note string) kernel.Event {
	t.Helper()
	ev, err := kernel.NewEvent(kernel.SourceKernel, "r-1/"+op+"/reconciled/1", "acme", "r-1", kernel.TypeOperationReconciled, actor, t0,
		kernel.Reconciliation{OperationID: op, Effect: effect, Basis: basis, Note: note})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func verdict(t *testing.T, attention bool, ops ...string) kernel.Event {
	t.Helper()
	ev, err := kernel.NewEvent(kernel.SourceKernel, "r-1/verdict/x", "acme", "r-1", kernel.TypeSupervisorVerdict, kernel.ActorSupervisor, t0,
		kernel.Verdict{Kind: kernel.VerdictKindReconciliation, NeedsAttention: attention, OperationIDs: ops, Supervisor: "builtin"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func payload(t *testing.T, n webhook.Notification) (p struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
	Text      string         `json:"text"`
}) {
	t.Helper()
	if err := json.Unmarshal(n.Body, &p); err != nil {
		t.Fatalf("%s: %v", n.Body, err)
	}
	return p
}

// TestDerive: a wall announces attention for its unknowns and, when its
// verdict asked for attention, for every operation; settled otherwise;
// an operator's ruling is settled whatever its effect; the kernel's
// run.awaiting announces run.awaiting (an agent's does not); other
// events announce nothing. The payload is the Standard Webhooks envelope
// with a Slack text in which nothing an agent wrote can mention anyone.
func TestDerive(t *testing.T) {
	t.Parallel()
	calm := []kernel.Event{
		verdict(t, false, "op-1", "op-2"),
		reconciliation(t, "op-1", kernel.ActorSupervisor, kernel.EffectUnknown, kernel.BasisInference, "no evidence <!channel>"),
		reconciliation(t, "op-2", kernel.ActorSupervisor, kernel.EffectNone, kernel.BasisProbe, "file absent"),
	}
	urgent := []kernel.Event{verdict(t, true, "op-3"), reconciliation(t, "op-3", kernel.ActorSupervisor, kernel.EffectOccurred, kernel.BasisProbe, "")}
	ruling := reconciliation(t, "op-1", kernel.OperatorActor("ann"), kernel.EffectUnknown, kernel.BasisOperator, "cannot tell & do not care")
	agent := reckontest.Run{Project: "acme", RunID: "r-9", Source: "bot"}
	wait := reckontest.Run{Project: "acme", RunID: "r-2", Source: kernel.SourceKernel}.Event("run/awaiting/op-4", "run.awaiting", t0,
		map[string]any{"operation_id": "op-4", "until": "2026-12-03T10:00:00Z"})
	events := append(append(calm, urgent...), ruling, wait,
		agent.Event("run/awaiting/op-1", "run.awaiting", t0, map[string]any{"operation_id": "op-1"}),
		agent.Started("op-5", "run_command", t0))

	ns, err := webhook.Derive(events)
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ event, op, reason string }
	wants := []want{
		{webhook.EventAttention, "op-1", "unknown"},
		{webhook.EventSettled, "op-2", ""},
		{webhook.EventAttention, "op-3", "verdict_needs_attention"},
		{webhook.EventSettled, "op-1", ""},
		{webhook.EventRunAwaiting, "op-4", ""},
	}
	if len(ns) != len(wants) {
		t.Fatalf("%d notifications, want %d: %+v", len(ns), len(wants), ns)
	}
	seen := map[string]bool{}
	for i, w := range wants {
		n := ns[i]
		p := payload(t, n)
		if n.Event != w.event || p.Type != w.event || p.Data["operation_id"] != w.op || (p.Data["reason"] != nil) != (w.reason != "") ||
			(w.reason != "" && p.Data["reason"] != w.reason) || !p.Timestamp.Equal(t0) {
			t.Errorf("notification %d: %s %s, want %+v", i, n.Event, n.Body, w)
		}
		if !strings.HasPrefix(n.MsgID, "msg_") || strings.Contains(n.MsgID, ".") || seen[n.MsgID] {
			t.Errorf("notification %d: webhook-id %q is not a fresh msg_ id without a dot", i, n.MsgID)
		}
		seen[n.MsgID] = true
		if strings.Contains(p.Text, "<!") || strings.Contains(p.Text, "& ") || !strings.HasPrefix(p.Text, "reckon: ") {
			t.Errorf("notification %d: text %q is not an escaped Slack text", i, p.Text)
		}
	}
	if p := payload(t, ns[2]); p.Data["verdict"] == nil {
		t.Errorf("attention by the verdict names no verdict: %s", ns[2].Body)
	}
	if p := payload(t, ns[4]); p.Data["until"] != "2026-12-03T10:00:00Z" || !strings.Contains(p.Text, "fails at") {
		t.Errorf("run.awaiting: %s", ns[4].Body)
	}
	again, err := webhook.Derive(events)
	if err != nil || again[0].MsgID != ns[0].MsgID || string(again[0].Body) != string(ns[0].Body) {
		t.Fatalf("the same fact derives another message: %v", err)
	}
	none, err := webhook.Derive([]kernel.Event{agent.Started("op-5", "run_command", t0), verdict(t, true, "op-5")})
	if err != nil || none != nil {
		t.Fatalf("tool events and a verdict alone announce %v (%v)", none, err)
	}
}

// TestParked: a park announces the event's key, run and reason; a row
// that held no event says so.
func TestParked(t *testing.T) {
	t.Parallel()
	n, err := webhook.Parked(webhook.ParkedData{Event: kernel.EventKey{SourceID: "kernel", EventID: "r-1/op-1/completed"},
		Project: "acme", RunID: "r-1", Type: kernel.TypeToolCompleted, Reason: "the journal holds a different payload"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	p := payload(t, n)
	ev, _ := p.Data["event"].(map[string]any)
	if n.Event != webhook.EventConflictParked || ev["event_id"] != "r-1/op-1/completed" || p.Data["reason"] == nil ||
		!strings.Contains(p.Text, "reckon outbox parked") || n.Digest != nil {
		t.Fatalf("parked: %+v %s", n, n.Body)
	}
	n, err = webhook.Parked(webhook.ParkedData{Event: kernel.EventKey{SourceID: "kernel", EventID: "x"}, Reason: "outbox row does not hold an event"}, t0)
	if err != nil || !strings.Contains(payload(t, n).Text, "holds no event") {
		t.Fatalf("undecodable: %s %v", n.Body, err)
	}
}
