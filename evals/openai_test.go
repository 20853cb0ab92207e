package evals

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/prompts"
)

// TestScoreOpenAIFromCassette scores the OpenAI-compatible supervisor, as
// the eval command builds it, against the fake model server replaying a
// recorded cassette: model output flows through the real client, parsing,
// repair round, validation and settlement into the scorer.
// RECKON_RECORD_CASSETTES=1 re-records the cassette from the fake's script.
//
// Hand-computed expectation (walls of threeWalls plus d):
//
//	a: occurred for a1 (probe occurred), a2 (no proof, truth none)
//	   → a1 correct; a2 proposed unsafe-occurred: held as unknown under
//	     evidence (attention raised by settlement, TP), settled under inference (FN)
//	b: omits an operation twice → invalid output (gave up after one repair round)
//	c: 500; a probe lie (rejected); then the probes' findings → c1, c2 correct, calm (TN)
//	d: 429 (Retry-After 0), then none for d1 (no proof, truth occurred)
//	   → proposed unsafe-none: held under evidence (TP), settled under inference (FN)
func TestScoreOpenAIFromCassette(t *testing.T) {
	t.Parallel()
	fx := append(threeWalls(), fixture("d", "s2", []pipeline.WallOperation{op("d1", "mcp__create_issue", "")}, "occurred"))
	for _, f := range fx {
		f.Wall.BuiltAt = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	}
	path := filepath.Join("testdata", "cassettes", "openai_four_walls.json")
	record := os.Getenv("RECKON_RECORD_CASSETTES") == "1"
	score := func(policy string) (*Report, *fakeopenai.Server) {
		fake := fakeopenai.New()
		t.Cleanup(fake.Close)
		if record && policy == "evidence" {
			fake.Script(
				fakeopenai.Step{Kind: fakeopenai.Valid, Effect: "occurred"},
				fakeopenai.Step{Kind: fakeopenai.MissingOperation}, fakeopenai.Step{Kind: fakeopenai.MissingOperation},
				fakeopenai.Step{Kind: fakeopenai.ServerError}, fakeopenai.Step{Kind: fakeopenai.LieAfterRepair}, fakeopenai.Step{Kind: fakeopenai.LieAfterRepair},
				fakeopenai.Step{Kind: fakeopenai.RateLimited, RetryAfter: "0"}, fakeopenai.Step{Kind: fakeopenai.NoneInference},
			)
			fake.Record("evals: OpenAI-compatible supervisor on four hand-built walls")
		} else if err := fake.Replay(path); err != nil {
			t.Fatal(err)
		}
		sup, err := supervisor.NewOpenAI(supervisor.OpenAIConfig{
			BaseURL: fake.URL, APIKey: "test-key", Model: "fake-model",
			Sleep: func(context.Context, time.Duration) error { return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Score(context.Background(), sup, fx, ScoreParams{Policy: policy, CaseTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if record && policy == "evidence" {
			raw, _ := json.MarshalIndent(fake.Recording(), "", "  ")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return rep, fake
	}
	rep, fake := score("evidence")
	if n := len(fake.Calls()); n != 8 {
		t.Errorf("model calls = %d, want 8 (1 + 2 + 3 + 2)", n)
	}

	m := rep.Metrics
	eq(t, "supervisor", rep.Supervisor, "openai")
	eq(t, "model", rep.Model, "fake-model")
	eq(t, "prompt version", rep.PromptVersion, prompts.ReconcileVersion)
	eq(t, "policy", rep.SettlePolicy, "evidence")
	eq(t, "walls ok", m.WallsOK, 3)
	eq(t, "invalid outputs", m.InvalidOutputs, 1)
	eq(t, "errored", m.Errored, 0)
	eq(t, "operations", m.Operations, 8)
	eq(t, "decided", m.Decided, 3)
	eq(t, "correct", m.Correct, 3)
	approx(t, "accuracy", m.Accuracy, 1)
	approx(t, "coverage", m.Coverage, 3.0/8.0)
	eq(t, "unsafe none", m.UnsafeNone, 0)
	eq(t, "unsafe occurred", m.UnsafeOccurred, 0)
	eq(t, "proposed unsafe none", m.ProposedUnsafeNone, 1)
	eq(t, "proposed unsafe occurred", m.ProposedUnsafeOccurred, 1)
	eq(t, "held", m.Held, 2)
	eq(t, "TP", m.NeedsAttention.TruePositives, 2)
	eq(t, "FN", m.NeedsAttention.FalseNegatives, 0)
	eq(t, "TN", m.NeedsAttention.TrueNegatives, 1)
	eq(t, "FP", m.NeedsAttention.FalsePositives, 0)
	want := map[string]map[string]int{
		"occurred": {"occurred": 2, "none": 0, "unknown": 1, "invalid": 2},
		"none":     {"occurred": 0, "none": 1, "unknown": 1, "invalid": 1},
	}
	for tr, row := range want {
		for said, n := range row {
			eq(t, "confusion "+tr+"→"+said, m.Confusion[tr][said], n)
		}
	}
	eq(t, "b status", rep.Cases[1].Status, StatusInvalid)
	eq(t, "d1 proposed", rep.Cases[3].Operations[0].Proposed, "none")

	// The same answers under the inference policy settle both lies.
	inf, _ := score("inference")
	im := inf.Metrics
	eq(t, "inference decided", im.Decided, 5)
	approx(t, "inference accuracy", im.Accuracy, 3.0/5.0)
	eq(t, "inference unsafe none", im.UnsafeNone, 1)
	eq(t, "inference unsafe occurred", im.UnsafeOccurred, 1)
	approx(t, "unsafe none rate", im.UnsafeNoneRate, 1.0/5.0)
	approx(t, "unsafe occurred rate", im.UnsafeOccurredRate, 1.0/3.0)
	eq(t, "inference proposed unsafe none", im.ProposedUnsafeNone, 1)
	eq(t, "inference FN", im.NeedsAttention.FalseNegatives, 2)
	eq(t, "inference TN", im.NeedsAttention.TrueNegatives, 1)

	// Tokens: the sum of the usage of every 200 answer of the cassette,
	// including the two rejected answers of wall b.
	raw, err := os.ReadFile(path)
	if err != nil && !record {
		t.Fatal(err)
	}
	var cas fakeopenai.Cassette
	if err := json.Unmarshal(raw, &cas); err != nil {
		t.Fatal(err)
	}
	var wantUsage pipeline.Usage
	for _, it := range cas.Interactions {
		if it.Response.Status != 200 {
			continue
		}
		var body struct {
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(it.Response.Body, &body); err != nil {
			t.Fatal(err)
		}
		wantUsage.PromptTokens += body.Usage.Prompt
		wantUsage.CompletionTokens += body.Usage.Completion
	}
	if wantUsage.PromptTokens == 0 {
		t.Fatal("cassette has no usage")
	}
	eq(t, "prompt tokens", m.Usage.PromptTokens, wantUsage.PromptTokens)
	eq(t, "completion tokens", m.Usage.CompletionTokens, wantUsage.CompletionTokens)
	if rep.Cases[1].Usage.PromptTokens == 0 {
		t.Error("the invalid case lost the usage of its rejected answers")
	}
}
