package triage

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/prompts"
)

// rawModel is an OpenAI-compatible endpoint that answers each wall with
// the raw message content answer returns for the wall's run, in the first
// round and the repair round alike: a model that lies, or a compromised
// endpoint, in exactly the bytes a test chooses.
type rawModel struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int // run id → calls
}

func newRawModel(t *testing.T, answer func(runID string) string) *rawModel {
	t.Helper()
	m := &rawModel{calls: map[string]int{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) < 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		data, ok := prompts.WallData(req.Messages[1].Content)
		var wall struct {
			RunID string `json:"run_id"`
		}
		if !ok || json.Unmarshal([]byte(data), &wall) != nil {
			http.Error(w, "no wall", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.calls[wall.RunID]++
		m.mu.Unlock()
		body, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-raw", "object": "chat.completion", "created": 1790000000, "model": "raw",
			"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": answer(wall.RunID)}, "finish_reason": "stop"}},
			"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(m.Close)
	return m
}

// verdictJSON is an answer over op-1 and op-2 of a seeded run, each
// operation's JSON object given whole (so a test can break it at will).
func verdictJSON(ops ...string) string {
	return `{"needs_attention":true,"causes":["c"],"remedies":["r"],"lesson":"l","operations":[` + strings.Join(ops, ",") + `]}`
}

func opJSON(id, effect, basis string) string {
	return fmt.Sprintf(`{"operation_id":%q,"effect":%q,"basis":%q,"note":"n"}`, id, effect, basis)
}

// TestHostileModelAnswersLeaveTheWallUnsettled: every answer a lying or
// compromised model can give that is not exactly one valid verdict over
// the wall's own ids is refused — after the one repair round, counted as
// invalid output — with nothing of its wall written and both operations
// still unsettled, while another run's wall in the same sweep is
// journaled. Ids differing by case, whitespace or invisible characters,
// ids of another run, numbers for strings, unknown effects and bases,
// basis probe without a probe, duplicate keys, trailing data, NUL and
// blank notes are all refused before anything is written.
func TestHostileModelAnswersLeaveTheWallUnsettled(t *testing.T) {
	t.Parallel()
	ok2 := opJSON("op-2", "unknown", "inference")
	cases := map[string]string{
		"trailing space in an id":           verdictJSON(opJSON("op-1 ", "unknown", "inference"), ok2),
		"id in another case":                verdictJSON(opJSON("OP-1", "unknown", "inference"), ok2),
		"zero-width space in an id":         verdictJSON(opJSON("op-1\u200b", "unknown", "inference"), ok2),
		"fullwidth id":                      verdictJSON(opJSON("ｏｐ-1", "unknown", "inference"), ok2),
		"another run's id":                  verdictJSON(opJSON("op-1", "unknown", "inference"), ok2, opJSON("op-9", "none", "inference")),
		"duplicate operation":               verdictJSON(opJSON("op-1", "unknown", "inference"), opJSON("op-1", "none", "inference"), ok2),
		"number for an id":                  verdictJSON(`{"operation_id":1,"effect":"unknown","basis":"inference","note":"n"}`, ok2),
		"number for an effect":              verdictJSON(`{"operation_id":"op-1","effect":0,"basis":"inference","note":"n"}`, ok2),
		"unknown effect":                    verdictJSON(opJSON("op-1", "uncertain", "inference"), ok2),
		"effect in another case":            verdictJSON(opJSON("op-1", "NONE", "inference"), ok2),
		"basis operator":                    verdictJSON(opJSON("op-1", "none", "operator"), ok2),
		"basis probe without probe":         verdictJSON(opJSON("op-1", "occurred", "probe"), ok2),
		"proposed_effect smuggled":          verdictJSON(`{"operation_id":"op-1","effect":"unknown","basis":"inference","note":"n","proposed_effect":"none"}`, ok2),
		"operations null":                   `{"needs_attention":true,"causes":["c"],"remedies":["r"],"lesson":"l","operations":null}`,
		"an array":                          "[" + verdictJSON(opJSON("op-1", "unknown", "inference"), ok2) + "]",
		"not JSON":                          "I think op-1 occurred.",
		"empty":                             "",
		"needs_attention a string":          strings.Replace(verdictJSON(opJSON("op-1", "unknown", "inference"), ok2), "true", `"true"`, 1),
		"duplicate effect key":              verdictJSON(`{"operation_id":"op-1","effect":"unknown","effect":"none","basis":"inference","note":"n"}`, ok2),
		"duplicate operations key":          strings.TrimSuffix(verdictJSON(opJSON("op-1", "unknown", "inference"), ok2), "}") + `,"operations":[` + opJSON("op-1", "none", "inference") + "," + opJSON("op-2", "none", "inference") + "]}",
		"a second object after":             verdictJSON(opJSON("op-1", "unknown", "inference"), ok2) + verdictJSON(opJSON("op-1", "none", "inference"), ok2),
		"NUL in a note":                     verdictJSON(`{"operation_id":"op-1","effect":"unknown","basis":"inference","note":"n\u0000"}`, ok2),
		"blank note":                        verdictJSON(`{"operation_id":"op-1","effect":"unknown","basis":"inference","note":" "}`, ok2),
		"NUL in the lesson":                 strings.Replace(verdictJSON(opJSON("op-1", "unknown", "inference"), ok2), `"lesson":"l"`, `"lesson":"l\u0000"`, 1),
		"too many operations":               verdictJSON(append([]string{opJSON("op-1", "unknown", "inference"), ok2}, strings.Split(strings.Repeat(opJSON("op-3", "none", "inference")+"\n", 500), "\n")[:500]...)...),
		"unknown effect needs no attention": strings.Replace(verdictJSON(opJSON("op-1", "unknown", "inference"), ok2), "true", "false", 1),
	}
	e := newEnv(t)
	runOf := map[string]string{}
	i := 0
	for name := range cases {
		i++
		run := fmt.Sprintf("bad-%02d", i)
		runOf[run] = name
		e.seedRun(run, opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", tool: "mcp__create_issue", outcome: "crash"})
	}
	e.seedRun("good", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", outcome: "uncertain"}, opSpec{id: "op-9", outcome: "uncertain"})
	model := newRawModel(t, func(run string) string {
		if run == "good" {
			return verdictJSON(opJSON("op-1", "unknown", "inference"), ok2, opJSON("op-9", "none", "inference"))
		}
		return cases[runOf[run]]
	})
	var mu sync.Mutex
	invalid := map[string]int{}
	sup, err := supervisor.NewOpenAI(supervisor.OpenAIConfig{
		BaseURL: model.URL + "/v1", APIKey: "k", Model: "raw", MaxAttempts: 1, Timeout: 10 * time.Second,
		OnInvalid: func(err error) { mu.Lock(); invalid[err.Error()]++; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.sweeper(Config{Supervisor: sup, Concurrency: 4}).Sweep(context.Background(), SweepParams{Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	e.drain()
	for _, w := range rep.Walls {
		if w.RunID == "good" {
			if w.Outcome != OutcomeJournaled {
				t.Errorf("the good run's wall was not journaled: %+v", w)
			}
			continue
		}
		name := runOf[w.RunID]
		if w.Outcome != OutcomeFailed || !strings.Contains(w.Error, "invalid supervisor output") {
			t.Errorf("%s: want a wall refused by validation, got outcome %s: %s", name, w.Outcome, w.Error)
		}
		if n := model.calls[w.RunID]; n != 2 {
			t.Errorf("%s: %d model calls, want the answer and one repair round", name, n)
		}
		if vs, recs := e.runVerdicts(w.RunID), e.reconciled(w.RunID); len(vs) != 0 || len(recs) != 0 {
			t.Errorf("%s: written: %d verdicts, %d reconciliations", name, len(vs), len(recs))
		}
		if left := e.unsettled(w.RunID); len(left) != 2 {
			t.Errorf("%s: unsettled %v, want op-1 and op-2", name, left)
		}
	}
	if len(rep.Walls) != len(cases)+1 || rep.Journaled != 1 {
		t.Fatalf("walls %d (want %d), journaled %d", len(rep.Walls), len(cases)+1, rep.Journaled)
	}
	// The good run's op-9 by inference under the default policy: held as
	// unknown with its proposal, never settled as none.
	for _, ev := range e.reconciled("good")["op-9"] {
		var d kernel.Reconciliation
		if ev.DecodeData(&d) != nil || d.Effect != kernel.EffectUnknown || d.ProposedEffect != kernel.EffectNone || d.Basis != kernel.BasisInference {
			t.Fatalf("op-9: %+v", d)
		}
	}
}

// TestRenderCardQuotesControlCharacters: a supervisor's note, causes,
// remedies and lesson (a model's text, which may echo an agent's; a
// builtin note quoting a probe detail that names a file an agent created)
// reach the operator's terminal on the verdict card. An escape sequence in
// them must not: it could move the cursor up and overwrite the card's
// effect and basis columns (here: turn a held unknown into "none probe").
func TestRenderCardQuotesControlCharacters(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	forge := "\x1b[1A\x1b[2K\r│ op-1                 none      probe\x07"
	verdict, err := kernel.NewEvent(kernel.SourceKernel, "run-1/verdict/x", "acme", "run-1", kernel.TypeSupervisorVerdict, kernel.ActorSupervisor, ts,
		kernel.Verdict{Kind: kernel.VerdictKindReconciliation, NeedsAttention: true, OperationIDs: []string{"op-1"}, Supervisor: "openai",
			Causes: []string{"cause " + forge}, Remedies: []string{"remedy " + forge}, Lesson: "lesson " + forge})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := kernel.NewEvent(kernel.SourceKernel, "run-1/op-1/reconciled/x", "acme", "run-1", kernel.TypeOperationReconciled, kernel.ActorSupervisor, ts,
		kernel.Reconciliation{OperationID: "op-1", Effect: kernel.EffectUnknown, ProposedEffect: kernel.EffectNone, Basis: kernel.BasisInference, Note: "note " + forge})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := RenderCard(&b, verdict, []kernel.Event{rec}); err != nil {
		t.Fatal(err)
	}
	card := b.String()
	for _, r := range card {
		if r == '\x1b' || r == '\x07' || r == '\r' {
			t.Fatalf("the card carries control character %q to the terminal:\n%q", r, card)
		}
	}
	if !strings.Contains(card, `\x1b[1A\x1b[2K`) {
		t.Fatalf("the escape is not shown quoted:\n%s", card)
	}
}
