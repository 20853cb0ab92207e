package gateway

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

func quantile(xs []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1)+0.5)]
}

// BenchmarkGatewayOverhead measures the latency a call gains by going
// through the gateway: the same MCP client calls the same upstream (reckon's
// test server, a stdio process) directly and through the gateway (stdio,
// real PostgreSQL, an outbox publisher running beside it as in `reckon
// mcp-gateway`), alternating call by call so both see the same store and
// machine load. Two tools: create_issue (a consequential write, fsynced by
// the server) and lookup_operation (a read that costs the server almost
// nothing, so the gateway's own cost stands out). Calls per tool and path:
// RECKON_BENCH_GATEWAY_CALLS (default 300).
func BenchmarkGatewayOverhead(b *testing.B) {
	n := 300
	if v, err := strconv.Atoi(os.Getenv("RECKON_BENCH_GATEWAY_CALLS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	pool := newSchema(b)
	store := filepath.Join(b.TempDir(), "issues.json")
	up := stdioIssues("issues", store)

	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		_ = outbox.NewPublisher(pool, journal.New(pool, nil), outbox.Config{}, nil, zerolog.Nop()).Run(pubCtx)
	}()
	defer func() { stopPub(); <-pubDone }()

	g, err := New(ctx, pool, Config{Project: "bench", Servers: []mcptool.ServerConfig{up}})
	if err != nil {
		b.Fatal(err)
	}
	through, done := stdioClient(b, g)
	defer func() { _ = through.Close(); <-done }()
	cmd := exec.Command(up.Command[0], up.Command[1:]...)
	cmd.Env = append(os.Environ(), helperEnv+"=issues")
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench-direct"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()

	call := func(cs *mcp.ClientSession, tool string, args map[string]any, meta mcp.Meta) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
		d := time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, err, res)
		}
		return d
	}
	type figures struct{ direct, through []time.Duration }
	results := map[string]*figures{"create_issue": {}, "lookup_operation": {}}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for i := range n {
			f := results["create_issue"]
			title := fmt.Sprintf("bench %d/%d", it, i)
			f.direct = append(f.direct, call(direct, "create_issue", map[string]any{"title": title},
				mcp.Meta{mcptool.IdempotencyKeyMeta: fmt.Sprintf("direct/%d/%d", it, i)}))
			f.through = append(f.through, call(through, "create_issue", map[string]any{"title": title}, nil))
			f = results["lookup_operation"]
			args := map[string]any{"key": fmt.Sprintf("direct/%d/%d", it, i)}
			f.direct = append(f.direct, call(direct, "lookup_operation", args, nil))
			f.through = append(f.through, call(through, "lookup_operation", args, nil))
		}
	}
	b.StopTimer()
	for _, tool := range []string{"create_issue", "lookup_operation"} {
		f := results[tool]
		d50, d99 := quantile(f.direct, 0.50), quantile(f.direct, 0.99)
		t50, t99 := quantile(f.through, 0.50), quantile(f.through, 0.99)
		fmt.Printf("gateway overhead, %-16s %4d calls: direct p50 %7.2f ms p99 %7.2f ms | through the gateway p50 %7.2f ms p99 %7.2f ms | added p50 %6.2f ms p99 %6.2f ms | ratio p50 %.2f p99 %.2f\n",
			tool, len(f.direct), ms(d50), ms(d99), ms(t50), ms(t99), ms(t50-d50), ms(t99-d99),
			float64(t50)/float64(d50), float64(t99)/float64(d99))
		b.ReportMetric(float64(t50)/float64(d50), tool+"-ratio-p50")
		b.ReportMetric(float64(t99)/float64(d99), tool+"-ratio-p99")
		b.ReportMetric(ms(t50-d50), tool+"-added-ms-p50")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
