package triage

import (
	"context"
	"math"
	"testing"

	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// A model server reports its own token usage. Counts so large that their
// sum wrapped around to a negative number took tokens off the sweep's
// spend, and a lying server bought the sweep walls past its token
// budget (Config.MaxTokens).
func TestTokenBudgetSurvivesOverflowingUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, r := range ids("run-", 3) {
		e.seedRun(r, opSpec{id: "op-1", outcome: "uncertain"})
	}
	liar := decideFunc{name: "liar", f: func(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
		d, err := supervisor.Builtin{}.Decide(ctx, w)
		d.Usage = pipeline.Usage{PromptTokens: math.MaxInt, CompletionTokens: math.MaxInt}
		return d, err
	}}
	rep, err := e.sweeper(Config{Supervisor: liar, MaxTokens: 150, Concurrency: 1}).Sweep(context.Background(), SweepParams{})
	if err != nil || rep.Journaled != 1 || rep.Count(OutcomeBudget) != 2 || rep.Tokens < 150 {
		t.Fatalf("token budget with overflowing usage: journaled %d, budget %d, tokens %d (%v)", rep.Journaled, rep.Count(OutcomeBudget), rep.Tokens, err)
	}
}
