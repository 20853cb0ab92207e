package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/plan"
)

// BenchmarkAgentOverhead measures an agent run's cost on the embedded
// Temporal server and real PostgreSQL, with the scripted model answering
// at once and a no-op tool, against bare no-op activities measured in the
// same iteration (bareActivityIntervals):
//
//   - call: the interval between consecutive no-op executions asked for by
//     one model answer: a tool call's whole path in an agent run;
//   - turn: the interval between the last execution of one answer and the
//     first of the next, less a call: a model turn's path (its activity,
//     the HTTP round trip to the local model, agent.turn recorded);
//   - x-bare-call and x-bare-turn: those medians over the bare median.
//
// Each iteration is one agent run of 10 answers of 10 no-op calls each.
func BenchmarkAgentOverhead(b *testing.B) {
	const turns, perTurn = 10, 10
	noop := &noopTool{ran: map[string]time.Time{}}
	m := fakeopenai.NewAgentModel()
	defer m.Close()
	e := newEnv(b, envOpts{extra: []kernel.Tool{noop}, model: &AgentModel{BaseURL: m.URL}})
	var within, across, bare []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bare = append(bare, bareActivityIntervals(b, turns*perTurn)...)
		runID := fmt.Sprintf("agent-bench-%d", i)
		var ops []string
		for t := range turns {
			step := fakeopenai.AgentStep{}
			for c := range perTurn {
				id := fmt.Sprintf("b%d-%d-%d", i, t, c)
				step.ToolCalls = append(step.ToolCalls, fakeopenai.AgentToolCall{ID: id, Name: "noop", Arguments: []byte(`{}`)})
				ops = append(ops, plan.AgentOperationID(len(ops)+1, id))
			}
			m.Script("scripted", step)
		}
		m.Script("scripted", fakeopenai.AgentStep{Content: "done"})
		b.StartTimer()
		e.startAgent(runID, Agent{Input: "bench", Tools: []string{"noop"}, MaxTurns: turns + 1})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := e.wait(ctx, runID)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		for k := 1; k < len(ops); k++ {
			d := noop.ran[runID+"/"+ops[k]].Sub(noop.ran[runID+"/"+ops[k-1]])
			if k%perTurn == 0 {
				across = append(across, d)
			} else {
				within = append(within, d)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	call, turn, ref := quantile(within, 0.5), quantile(across, 0.5)-quantile(within, 0.5), quantile(bare, 0.5)
	b.ReportMetric(ms(call), "call-median-ms")
	b.ReportMetric(ms(turn), "turn-median-ms")
	b.ReportMetric(ms(ref), "bare-median-ms")
	b.ReportMetric(float64(call)/float64(ref), "x-bare-call")
	b.ReportMetric(float64(turn)/float64(ref), "x-bare-turn")
	b.ReportMetric(0, "ns/op")
}
