package triage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/prompts"
)

// Every scripted model behaviour ends in either valid journaled verdicts or
// nothing written plus a reported failure.
func TestSweepWithFakeOpenAI(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		script    []fakeopenai.Step
		journaled bool
		errLike   string
		invalid   float64 // model answers rejected by validation, counted once each
	}{
		{name: "valid", journaled: true},
		{name: "valid occurred", script: []fakeopenai.Step{{Kind: fakeopenai.Valid, Effect: kernel.EffectOccurred}}, journaled: true},
		{name: "429 with Retry-After then valid", script: []fakeopenai.Step{{Kind: fakeopenai.RateLimited, RetryAfter: "1"}}, journaled: true},
		{name: "429 forever", script: repeat(fakeopenai.Step{Kind: fakeopenai.RateLimited, RetryAfter: "0"}, 3), errLike: "429"},
		{name: "500 then valid", script: []fakeopenai.Step{{Kind: fakeopenai.ServerError}}, journaled: true},
		{name: "500 forever", script: repeat(fakeopenai.Step{Kind: fakeopenai.ServerError}, 3), errLike: "500"},
		{name: "malformed JSON then valid", script: []fakeopenai.Step{{Kind: fakeopenai.Malformed}}, journaled: true, invalid: 1},
		{name: "malformed JSON twice", script: repeat(fakeopenai.Step{Kind: fakeopenai.Malformed}, 2), errLike: "not the JSON object", invalid: 2},
		{name: "missing operation twice", script: repeat(fakeopenai.Step{Kind: fakeopenai.MissingOperation}, 2), errLike: `missing "op-2"`, invalid: 2},
		{name: "invented id twice", script: repeat(fakeopenai.Step{Kind: fakeopenai.InventedID}, 2), errLike: "op-invented-999", invalid: 2},
		{name: "invented id then valid", script: []fakeopenai.Step{{Kind: fakeopenai.InventedID}}, journaled: true, invalid: 1},
		{name: "note over 2000 bytes twice", script: repeat(fakeopenai.Step{Kind: fakeopenai.LongNote}, 2), errLike: "2001 bytes", invalid: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", tool: "mcp__create_issue", outcome: "crash"})
			f := fakeopenai.New()
			defer f.Close()
			f.Script(c.script...)
			m := NewMetrics(nil)
			model, err := supervisor.NewOpenAI(supervisor.OpenAIConfig{
				BaseURL: f.URL, APIKey: "k", Model: "fake-model", MaxAttempts: 3,
				BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
				Observe:   m.ObserveModelCall,
				OnInvalid: func(error) { m.InvalidOutput(supervisor.OpenAIName) },
			})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := e.sweeper(Config{Supervisor: model, Metrics: m}).Sweep(context.Background(), SweepParams{})
			if err != nil {
				t.Fatal(err)
			}
			if got := testutil.ToFloat64(m.invalid.WithLabelValues(supervisor.OpenAIName)); got != c.invalid {
				t.Fatalf("invalid outputs counted %v, want %v", got, c.invalid)
			}
			e.drain()
			vs := e.runVerdicts("run-1")
			recs := e.reconciled("run-1")
			if c.journaled {
				if rep.Journaled != 1 || len(vs) != 1 || len(recs) != 2 {
					t.Fatalf("want one journaled wall: %+v verdicts %+v", rep, vs)
				}
				v := vs[0]
				if v.Supervisor != supervisor.OpenAIName || v.Model != "fake-model" || v.PromptVersion != prompts.ReconcileVersion || v.WallDigest == "" {
					t.Fatalf("verdict identity: %+v", v)
				}
				for op, evs := range recs {
					var d kernel.Reconciliation
					if evs[0].DecodeData(&d) != nil || evs[0].Actor != kernel.ActorSupervisor || d.Basis != kernel.BasisInference || len(d.Note) > kernel.MaxNoteBytes {
						t.Fatalf("%s: %+v", op, evs[0])
					}
				}
				if left := e.unsettled("run-1"); len(left) != 0 {
					t.Fatalf("unsettled after verdict: %v", left)
				}
				return
			}
			if rep.Failed != 1 || rep.Journaled != 0 || !strings.Contains(rep.Walls[0].Error, c.errLike) {
				t.Fatalf("want a reported failure containing %q: %+v", c.errLike, rep.Walls)
			}
			if len(vs) != 0 || len(recs) != 0 || e.outboxRows() != 0 {
				t.Fatalf("something was written: verdicts %d, reconciliations %d, outbox %d", len(vs), len(recs), e.outboxRows())
			}
			if left := e.unsettled("run-1"); len(left) != 2 {
				t.Fatalf("unsettled: %v", left)
			}
		})
	}
}

func repeat(s fakeopenai.Step, n int) []fakeopenai.Step {
	out := make([]fakeopenai.Step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// The verdicts a sweep journaled are read back with what operators have
// ruled since (the route itself is tested in kernel/httpapi).
func TestVerdictsAfterASweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"})
	e.seedRun("run-2", opSpec{id: "op-1", outcome: "uncertain"})
	if rep, err := e.sweeper(Config{}).Sweep(ctx, SweepParams{}); err != nil || rep.Journaled != 2 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	e.drain()
	page, err := e.ops.Verdicts(ctx, operations.VerdictParams{Project: "acme"})
	vs, res := page.Verdicts, page.Resolutions
	if err != nil || len(vs) != 2 || vs[0].Type != kernel.TypeSupervisorVerdict {
		t.Fatalf("verdicts: %+v %v", vs, err)
	}
	if len(res) != 2 || res[0].Verdict != vs[0].Key() || res[0].Resolved || len(res[0].DecidedByOperator) != 0 {
		t.Fatalf("resolutions before any operator ruling: %+v", res)
	}
	// An operator rules on run-1's operation: its verdict is resolved, the
	// other one is not.
	e.humanReconcile("run-1", "op-1", kernel.EffectOccurred)
	e.drain()
	page, err = e.ops.Verdicts(ctx, operations.VerdictParams{Project: "acme"})
	if err != nil || len(page.Resolutions) != 2 {
		t.Fatalf("resolutions: %+v %v", page.Resolutions, err)
	}
	for i, r := range page.Resolutions {
		want := page.Verdicts[i].RunID == "run-1"
		if r.Resolved != want || (want && (len(r.DecidedByOperator) != 1 || r.DecidedByOperator[0].Actor != "operator:alice" || r.DecidedByOperator[0].Effect != kernel.EffectOccurred)) {
			t.Fatalf("resolution of %s: %+v", page.Verdicts[i].RunID, r)
		}
	}
	page, err = e.ops.Verdicts(ctx, operations.VerdictParams{Project: "acme", RunID: "run-2"})
	if err != nil || len(page.Verdicts) != 1 || page.Verdicts[0].RunID != "run-2" {
		t.Fatalf("run filter: %+v %v", page.Verdicts, err)
	}
}
