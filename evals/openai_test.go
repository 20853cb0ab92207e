package evals

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor/fakeopenai"
	"github.com/seed-7bc021c3/reckon/prompts"
)

// TestScoreOpenAIFromCassette scores the OpenAI-compatible supervisor, as
// the eval command builds it, against the fake model server replaying a
// recorded cassette: model output flows through the real client, parsing,
// repair round and validation into the scorer. RECKON_RECORD_CASSETTES=1
// re-records the cassette from the fake's script.
//
// Hand-computed expectation (walls of threeWalls plus d):
//
//	a: answers occurred for a1, a2          → a1 correct, a2 unsafe-occurred; attention not raised (FN)
//	b: omits an operation twice             → invalid output (gave up after one repair round)
//	c: 500, then none for c1, c2            → c1 correct, c2 unsafe-none; attention not raised (TN)
//	d: 429 (Retry-After 0), then unknown    → d1 unknown; attention raised (TP)
func TestScoreOpenAIFromCassette(t *testing.T) {
	t.Parallel()
	fx := append(threeWalls(), fixture("d", "s2", []pipeline.WallOperation{op("d1", "mcp__create_issue", "")}, "occurred"))
	for _, f := range fx {
		f.Wall.BuiltAt = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	}
	path := filepath.Join("testdata", "cassettes", "openai_four_walls.json")
	fake := fakeopenai.New()
	defer fake.Close()
	record := os.Getenv("RECKON_RECORD_CASSETTES") == "1"
	if record {
		fake.Script(
			fakeopenai.Step{Kind: fakeopenai.Valid, Effect: "occurred"},
			fakeopenai.Step{Kind: fakeopenai.MissingOperation}, fakeopenai.Step{Kind: fakeopenai.MissingOperation},
			fakeopenai.Step{Kind: fakeopenai.ServerError}, fakeopenai.Step{Kind: fakeopenai.Valid, Effect: "none"},
			fakeopenai.Step{Kind: fakeopenai.RateLimited, RetryAfter: "0"}, fakeopenai.Step{Kind: fakeopenai.Valid, Effect: "unknown"},
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
	rep, err := Score(context.Background(), sup, fx, Options{CaseTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if record {
		raw, _ := json.MarshalIndent(fake.Recording(), "", "  ")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(fake.Calls()); n != 7 {
		t.Errorf("model calls = %d, want 7 (1 + 2 + 2 + 2)", n)
	}

	m := rep.Metrics
	eq(t, "supervisor", rep.Supervisor, "openai")
	eq(t, "model", rep.Model, "fake-model")
	eq(t, "prompt version", rep.PromptVersion, prompts.ReconcileVersion)
	eq(t, "walls ok", m.WallsOK, 3)
	eq(t, "invalid outputs", m.InvalidOutputs, 1)
	eq(t, "errored", m.Errored, 0)
	eq(t, "operations", m.Operations, 8)
	eq(t, "decided", m.Decided, 4)
	eq(t, "correct", m.Correct, 2)
	approx(t, "accuracy", m.Accuracy, 0.5)
	approx(t, "coverage", m.Coverage, 0.5)
	eq(t, "unsafe none", m.UnsafeNone, 1)
	eq(t, "unsafe occurred", m.UnsafeOccurred, 1)
	approx(t, "unsafe none rate", m.UnsafeNoneRate, 1.0/5.0)
	approx(t, "unsafe occurred rate", m.UnsafeOccurredRate, 1.0/3.0)
	eq(t, "TP", m.NeedsAttention.TruePositives, 1)
	eq(t, "FN", m.NeedsAttention.FalseNegatives, 1)
	eq(t, "TN", m.NeedsAttention.TrueNegatives, 1)
	eq(t, "FP", m.NeedsAttention.FalsePositives, 0)
	approx(t, "precision", m.NeedsAttention.Precision, 1)
	approx(t, "recall", m.NeedsAttention.Recall, 0.5)
	want := map[string]map[string]int{
		"occurred": {"occurred": 1, "none": 1, "unknown": 1, "invalid": 2},
		"none":     {"occurred": 1, "none": 1, "unknown": 0, "invalid": 1},
	}
	for tr, row := range want {
		for said, n := range row {
			eq(t, "confusion "+tr+"→"+said, m.Confusion[tr][said], n)
		}
	}
	eq(t, "b status", rep.Cases[1].Status, StatusInvalid)

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
