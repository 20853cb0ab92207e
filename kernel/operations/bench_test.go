package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

// Shape of the benchmark journal.
const (
	benchEventsPerRun = 42 // run.started, 20 × (tool.started, tool.completed), run.completed
	benchProject      = "acme"
	benchUnsettledOps = 1000
)

// benchHistorySQL appends settled history: runs [$1, $2) of 42 events each,
// 40% of them in the listed project, from two sources, event times spread
// pseudo-randomly over the 60 days before $3 (so a share of history is inside
// the listing window too). Every tool.started is settled by its
// tool.completed, so open = false, as ingest would have written it.
const benchHistorySQL = `
INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data,
    payload_digest, operation_id, settles, open)
SELECT
    CASE WHEN r % 2 = 0 THEN 'kernel' ELSE 'agent-x' END,
    'h' || r || '/' || CASE WHEN p = 0 THEN 'run/started' WHEN p = 41 THEN 'run/completed'
        ELSE 'op-' || ((p - 1) / 2) || CASE WHEN (p - 1) % 2 = 0 THEN '/started' ELSE '/completed' END END,
    CASE WHEN r % 10 < 4 THEN 'acme' ELSE 'proj-' || (r % 10) END,
    'h' || r,
    CASE WHEN p = 0 THEN 'run.started' WHEN p = 41 THEN 'run.completed'
        WHEN (p - 1) % 2 = 0 THEN 'tool.started' ELSE 'tool.completed' END,
    $3::timestamptz - ((r * 7919) % 1000003)::float8 / 1000003.0 * interval '60 days' + p * interval '1 second',
    CASE WHEN r % 2 = 0 THEN 'kernel' ELSE 'agent' END,
    CASE WHEN p = 0 OR p = 41 THEN '{}'::jsonb
        WHEN (p - 1) % 2 = 0 THEN jsonb_build_object('operation_id', 'op-' || ((p - 1) / 2), 'tool', 'run_command',
            'args', jsonb_build_object('command', 'echo ' || r || ' > out.txt', 'timeout_s', 30))
        ELSE jsonb_build_object('operation_id', 'op-' || ((p - 1) / 2), 'result_summary', 'exit 0') END,
    decode(md5(r || '/' || p), 'hex'),
    CASE WHEN p = 0 OR p = 41 THEN NULL ELSE 'op-' || ((p - 1) / 2) END,
    p <> 0 AND p <> 41 AND (p - 1) % 2 = 1,
    false
FROM generate_series($1::bigint, $2::bigint - 1) AS r, generate_series(0, 41) AS p`

// BenchmarkListing measures the operations listing over journals of growing
// history (RECKON_BENCH_SIZES, default 100k,1m,10m events), each holding
// the same ~1,000 unsettled operations among settled history, and prints
// p50/p95 per size, the ratio of the largest to the smallest size, and
// EXPLAIN (ANALYZE, BUFFERS) of the listing query. Each size is its own
// schema, and the sizes are measured interleaved, round after round, so that
// load from elsewhere on the machine falls on every size alike instead of
// skewing the ratio. Run with `make bench`.
func BenchmarkListing(b *testing.B) {
	sizes, err := benchSizes(os.Getenv("RECKON_BENCH_SIZES"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)

	type journalSize struct {
		size      int
		events    int64
		build     time.Duration
		pool      *pgxpool.Pool
		svc       *Service
		lat, walk []time.Duration
		exec      []time.Duration
	}
	var js []*journalSize
	for _, size := range sizes {
		start := time.Now()
		sch := pgtest.New(b)
		// A bench-only schema: WAL for it buys nothing and costs minutes.
		mustExec(b, sch.Pool, `ALTER TABLE journal_events SET UNLOGGED`)
		j := journal.New(sch.Pool, nil)
		unsettled := benchUnsettled(b, j, now)
		benchAppendHistory(b, sch.Pool, 0, int64(size-unsettled)/benchEventsPerRun, now)
		x := &journalSize{size: size, build: time.Since(start), pool: sch.Pool,
			svc: New(sch.Pool, Config{Now: func() time.Time { return now }, Liveness: benchLiveness{}})}
		if err := sch.Pool.QueryRow(ctx, `SELECT count(*) FROM journal_events`).Scan(&x.events); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "journal of %d events built in %v\n", x.events, x.build.Round(time.Second))
		js = append(js, x)
	}

	page := func(svc *Service, cursor string) string {
		p, err := svc.List(ctx, ListParams{Project: benchProject, Cursor: cursor, Limit: DefaultLimit})
		if err != nil {
			b.Fatal(err)
		}
		return p.NextCursor
	}
	walk := func(svc *Service) int {
		n, cursor := 0, ""
		for {
			p, err := svc.List(ctx, ListParams{Project: benchProject, Cursor: cursor, Limit: DefaultLimit})
			if err != nil {
				b.Fatal(err)
			}
			n += len(p.Operations)
			if cursor = p.NextCursor; cursor == "" {
				return n
			}
		}
	}
	for _, x := range js {
		// Correctness first: the whole listing is exactly the unsettled set.
		if n := walk(x.svc); n != benchUnsettledOps {
			b.Fatalf("%d events: listed %d operations, want %d", x.events, n, benchUnsettledOps)
		}
		for i := 0; i < 100; i++ {
			page(x.svc, "")
		}
	}
	const rounds, perRound = 25, 20
	for r := 0; r < rounds; r++ {
		for k := range js {
			x := js[(r+k)%len(js)] // rotate the order every round
			for i := 0; i < perRound; i++ {
				t := time.Now()
				page(x.svc, "")
				x.lat = append(x.lat, time.Since(t))
			}
			t := time.Now()
			walk(x.svc)
			x.walk = append(x.walk, time.Since(t))
			x.exec = append(x.exec, serverTime(b, x.pool, now))
		}
	}

	for _, x := range js {
		sortDurations(x.lat)
		sortDurations(x.walk)
		sortDurations(x.exec)
		fmt.Printf("\n=== listing at %d events ===\n", x.events)
		fmt.Printf("first page (limit %d): p50 %s  p95 %s  p99 %s; server execution p50 %s; all %d operations (%d pages): p50 %s\n",
			DefaultLimit, ms(pct(x.lat, 50)), ms(pct(x.lat, 95)), ms(pct(x.lat, 99)), ms(pct(x.exec, 50)),
			benchUnsettledOps, benchUnsettledOps/DefaultLimit, ms(pct(x.walk, 50)))
		fmt.Println(explainListing(b, x.pool, now))
		b.ReportMetric(float64(pct(x.lat, 95).Microseconds())/1000, fmt.Sprintf("p95-ms@%s", sizeName(x.size)))
	}
	first, last := js[0], js[len(js)-1]
	ratio := float64(pct(last.lat, 95)) / float64(pct(first.lat, 95))
	fmt.Printf("\n=== operations listing benchmark, %s ===\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("machine: %s, %d CPUs, %s\n", cpuModel(), runtime.NumCPU(), pgVersion(b, first.pool))
	fmt.Printf("%d × %d first-page listings (limit %d) per size, interleaved; ~%d unsettled operations in every journal\n",
		rounds, perRound, DefaultLimit, benchUnsettledOps)
	fmt.Printf("%-6s %-10s %-9s %-9s %-9s %-12s %-14s %-8s\n", "size", "events", "p50", "p95", "p99", "server p50", "all-pages p50", "build")
	for _, x := range js {
		fmt.Printf("%-6s %-10d %-9s %-9s %-9s %-12s %-14s %-8s\n", sizeName(x.size), x.events, ms(pct(x.lat, 50)), ms(pct(x.lat, 95)),
			ms(pct(x.lat, 99)), ms(pct(x.exec, 50)), ms(pct(x.walk, 50)), x.build.Round(time.Second))
	}
	fmt.Printf("p95 ratio %s/%s = %.2f (target ≤ 1.5); p95 at %s = %s (target < 20 ms)\n",
		sizeName(last.size), sizeName(first.size), ratio, sizeName(last.size), ms(pct(last.lat, 95)))
	b.ReportMetric(ratio, "p95-ratio")
}

// serverTime runs the first-page listing query under EXPLAIN ANALYZE and
// returns PostgreSQL's own execution time: the part of the latency that
// belongs to the journal, free of client scheduling noise.
func serverTime(b *testing.B, pool *pgxpool.Pool, now time.Time) time.Duration {
	since, floor := benchWindow(now)
	var plan string
	if err := pool.QueryRow(context.Background(), `EXPLAIN (ANALYZE, FORMAT JSON) `+listSQL,
		benchProject, since, "", floor, int64(0), DefaultLimit+1, floor).Scan(&plan); err != nil {
		b.Fatalf("explain: %v", err)
	}
	var out []struct {
		Execution float64 `json:"Execution Time"`
	}
	if err := json.Unmarshal([]byte(plan), &out); err != nil || len(out) == 0 {
		b.Fatalf("explain json: %v", err)
	}
	return time.Duration(out[0].Execution * float64(time.Millisecond))
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// benchLiveness answers "not running" instantly for kernel runs without a
// journaled end, so the benchmark measures the journal, not a fake RPC.
type benchLiveness struct{}

func (benchLiveness) Running(context.Context, string, string) (bool, error) { return false, nil }

// benchUnsettled ingests the unresolved operations through the real ingest
// path: 100 runs × 10 operations in the listed project within the last three
// days — 40 external runs that ended (crash_window), 40 runs whose operations
// failed uncertain, 20 kernel runs with no end journaled (liveness asked).
// It returns how many events it wrote.
func benchUnsettled(b *testing.B, j *journal.Store, now time.Time) int {
	ctx := context.Background()
	var evs []kernel.Event
	mk := func(src, id, run, typ string, ts time.Time, data string) {
		actor := "agent"
		if src == kernel.SourceKernel {
			actor = "kernel"
		}
		evs = append(evs, kernel.Event{SourceID: src, EventID: id, Project: benchProject, RunID: run, Type: typ,
			TS: ts, Actor: actor, Data: []byte(data)})
	}
	for r := 0; r < 100; r++ {
		run := fmt.Sprintf("u%d", r)
		src := "agent-x"
		if r >= 80 {
			src = kernel.SourceKernel
		}
		base := now.Add(-72 * time.Hour).Add(time.Duration(r) * 40 * time.Minute)
		mk(src, run+"/run/started", run, kernel.TypeRunStarted, base, `{}`)
		for o := 0; o < 10; o++ {
			op := fmt.Sprintf("op-%d", o)
			ts := base.Add(time.Duration(o) * time.Second)
			mk(src, run+"/"+op+"/started", run, kernel.TypeToolStarted, ts,
				fmt.Sprintf(`{"operation_id":%q,"tool":"mcp__create_issue","args":{"title":"Disk full on db-%d"}}`, op, o))
			if r >= 40 && r < 80 {
				mk(src, run+"/"+op+"/failed", run, kernel.TypeToolFailed, ts.Add(time.Second),
					fmt.Sprintf(`{"operation_id":%q,"error_type":"activity_failed","error":"worker lost","effect":"uncertain"}`, op))
			}
		}
		if r < 80 {
			mk(src, run+"/run/failed", run, kernel.TypeRunFailed, base.Add(time.Minute), `{"error":"worker lost"}`)
		}
	}
	for i := 0; i < len(evs); i += 500 {
		if _, err := j.Ingest(ctx, evs[i:min(i+500, len(evs))]); err != nil {
			b.Fatal(err)
		}
	}
	return len(evs)
}

// benchAppendHistory appends runs [from, to) of settled history. Secondary
// indexes are dropped and rebuilt around the bulk insert (their definitions
// read back from the catalog, so the rebuilt indexes are the migrations'
// own), then the table is vacuumed and analyzed as autovacuum would.
func benchAppendHistory(b *testing.B, pool *pgxpool.Pool, from, to int64, now time.Time) {
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
SELECT i.indexname, i.indexdef FROM pg_indexes i
WHERE i.schemaname = current_schema() AND i.tablename = 'journal_events'
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`)
	if err != nil {
		b.Fatal(err)
	}
	var names, defs []string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			b.Fatal(err)
		}
		// A partitioned table's index is defined ON ONLY the table (its
		// partitions' indexes attached one by one); made again on the
		// table, it is built on every partition.
		names, defs = append(names, n), append(defs, strings.Replace(d, " ON ONLY ", " ON ", 1))
	}
	rows.Close()
	for _, n := range names {
		mustExec(b, pool, `DROP INDEX `+n)
	}
	const chunk = 25000 // runs per statement (~1M events)
	for r := from; r < to; r += chunk {
		t := time.Now()
		mustExec(b, pool, benchHistorySQL, r, min(r+chunk, to), now)
		fmt.Fprintf(os.Stderr, "  history runs %d..%d (%d events) in %v\n", r, min(r+chunk, to), (min(r+chunk, to)-r)*benchEventsPerRun, time.Since(t).Round(time.Millisecond))
	}
	t := time.Now()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET maintenance_work_mem = '512MB'`); err != nil {
		b.Fatal(err)
	}
	for _, d := range defs {
		if _, err := conn.Exec(ctx, d); err != nil {
			b.Fatalf("rebuild index: %v", err)
		}
	}
	if _, err := conn.Exec(ctx, `VACUUM journal_events`); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, pgtest.AnalyzeJournalSQL); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "  indexes rebuilt, vacuumed and analyzed in %v\n", time.Since(t).Round(time.Millisecond))
}

// benchWindow is the window start and the floor of ts of a listing at now
// (Service.window), as the benchmark's service computes them.
func benchWindow(now time.Time) (since, floor time.Time) {
	return (&Service{cfg: Config{Window: DefaultWindow}}).window(now)
}

func explainListing(b *testing.B, pool *pgxpool.Pool, now time.Time) string {
	ctx := context.Background()
	since, floor := benchWindow(now)
	rows, err := pool.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+listSQL, benchProject, since, "", floor, int64(0), DefaultLimit+1, floor)
	if err != nil {
		b.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	var sb strings.Builder
	sb.WriteString("EXPLAIN (ANALYZE, BUFFERS) of the listing query, first page:\n")
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			b.Fatal(err)
		}
		sb.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return sb.String()
}

func mustExec(b *testing.B, pool *pgxpool.Pool, sql string, args ...any) {
	b.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		b.Fatalf("%s: %v", strings.Fields(sql)[0], err)
	}
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func benchSizes(spec string) ([]int, error) {
	if spec == "" {
		spec = "100k,1m,10m"
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1000, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "m"):
			mult, f = 1000000, strings.TrimSuffix(f, "m")
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("RECKON_BENCH_SIZES: %q is not a size like 100k or 1m", f)
		}
		out = append(out, n*mult)
	}
	sort.Ints(out)
	return out, nil
}

func sizeName(n int) string {
	switch {
	case n >= 1000000:
		return fmt.Sprintf("%.3gM", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.3gk", float64(n)/1e3)
	}
	return strconv.Itoa(n)
}

func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func pgVersion(b *testing.B, pool *pgxpool.Pool) string {
	var v, sb string
	if err := pool.QueryRow(context.Background(), `SELECT split_part(version(), ' on ', 1), current_setting('shared_buffers')`).Scan(&v, &sb); err != nil {
		b.Fatal(err)
	}
	return v + " (shared_buffers " + sb + ")"
}
