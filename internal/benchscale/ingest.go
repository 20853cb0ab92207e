package benchscale

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
)

// BatchSizes are the batch sizes of the ingest measurement: 100 goes
// through the ingest statement, 500 through COPY (kernel/journal's
// paths for a call of that size).
var BatchSizes = []int{100, 500}

// ingestRounds: each side ingests its batches in this many rounds, the
// sides alternating, so that a disturbance of the shared machine falls on
// both.
const ingestRounds = 2

// ingest measures the batched ingest rate: the same batches of new runs
// through kernel/journal's Store.Ingest into the partitioned journal and
// through pgtest.FlatIngestSQL into the flat one, Concurrency writers each.
func ingest(ctx context.Context, b *bench, res *Result) error {
	store := journal.New(b.db.part, nil)
	part := func(ctx context.Context, evs []kernel.Event) error {
		out, err := store.Ingest(ctx, evs)
		if err != nil {
			return err
		}
		return allAccepted(len(evs), len(out), func(i int) bool { return out[i].Status == kernel.StatusAccepted })
	}
	flat := func(ctx context.Context, evs []kernel.Event) error { return flatIngest(ctx, b.db.flat, evs) }
	for _, size := range BatchSizes {
		batches := newBatches(b.cfg, size)
		var tPart, tFlat time.Duration
		for r := range ingestRounds {
			lo, hi := r*len(batches)/ingestRounds, (r+1)*len(batches)/ingestRounds
			sides := []struct {
				p    *pgxpool.Pool
				f    func(context.Context, []kernel.Event) error
				into *time.Duration
			}{{b.db.part, part, &tPart}, {b.db.flat, flat, &tFlat}}
			if r%2 == 1 {
				sides[0], sides[1] = sides[1], sides[0]
			}
			for _, s := range sides {
				d, err := b.drive(ctx, s.p, batches[lo:hi], s.f)
				if err != nil {
					return fmt.Errorf("batches of %d: %w", size, err)
				}
				*s.into += d
			}
		}
		n := float64(len(batches) * size)
		res.Ingest = append(res.Ingest, IngestFigure{Batch: size, Part: n / tPart.Seconds(), Flat: n / tFlat.Seconds()})
	}
	return nil
}

// allAccepted fails unless all n events of a batch were written.
func allAccepted(n, got int, accepted func(int) bool) error {
	if got != n {
		return fmt.Errorf("%d answers for %d events", got, n)
	}
	for i := range got {
		if !accepted(i) {
			return fmt.Errorf("event %d of the batch not accepted", i)
		}
	}
	return nil
}

// drive writes batches with Concurrency writers after a checkpoint and
// returns the wall time.
func (b *bench) drive(ctx context.Context, p *pgxpool.Pool, batches [][]kernel.Event, f func(context.Context, []kernel.Event) error) (time.Duration, error) {
	if _, err := p.Exec(ctx, checkpointSQL); err != nil {
		return 0, err
	}
	next := make(chan []kernel.Event)
	errs := make(chan error, b.cfg.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for range b.cfg.Concurrency {
		wg.Go(func() {
			for evs := range next {
				if err := f(ctx, evs); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	func() {
		defer close(next)
		for _, evs := range batches {
			select {
			case next <- evs:
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	d := time.Since(start)
	select {
	case err := <-errs:
		return 0, err
	default:
		return d, nil
	}
}

// newBatches makes the batches of one size: whole runs of new run ids in
// random projects of the journal (a run of 100 events, as the journal's
// own), the last operation of one run in twenty left open, as in the journal.
func newBatches(c Config, size int) [][]kernel.Event {
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	n := max(c.IngestEvents/size, c.Concurrency*ingestRounds)
	now := time.Now().UTC()
	out := make([][]kernel.Event, n)
	for i := range out {
		evs := make([]kernel.Event, 0, size)
		for r := 0; len(evs) < size; r++ {
			project := fmt.Sprintf("proj-%04d", rng.IntN(c.Projects))
			run := fmt.Sprintf("ingest-%d-%d-%d", size, i, r)
			evs = appendRun(evs, project, run, min(eventsPerRun, size-len(evs)), now, rng.IntN(20) == 0)
		}
		out[i] = evs
	}
	return out
}

// appendRun appends a run of n events (at least 2): run.started, tool
// pairs, run.completed; with open, its last tool.started has no
// tool.completed.
func appendRun(evs []kernel.Event, project, run string, n int, now time.Time, open bool) []kernel.Event {
	ev := func(i int, typ string, data any) kernel.Event {
		raw, _ := json.Marshal(data)
		return kernel.Event{SourceID: "agent-bench", EventID: fmt.Sprintf("%s-e%d", run, i), Project: project, RunID: run,
			Type: typ, TS: now.Add(time.Duration(i) * time.Millisecond), Actor: "agent", Data: raw}
	}
	evs = append(evs, ev(0, "run.started", map[string]any{"agent": "bench-scale"}))
	for i := 1; i < n-1; i++ {
		op := fmt.Sprintf("op-%d", (i-1)/2)
		if i%2 == 1 {
			evs = append(evs, ev(i, "tool.started", map[string]any{"operation_id": op, "tool": fmt.Sprintf("tool_%d", i%12),
				"args": map[string]any{"path": fmt.Sprintf("/src/file%d.go", i), "line": i * 7}}))
		} else if !(open && i >= n-3) {
			evs = append(evs, ev(i, "tool.completed", map[string]any{"operation_id": op, "result": map[string]any{"ok": true}}))
		} else {
			evs = append(evs, ev(i, "tool.started", map[string]any{"operation_id": op + "-again", "tool": "tool_0", "args": map[string]any{}}))
		}
	}
	return append(evs, ev(n-1, "run.completed", map[string]any{}))
}

// flatIngest writes a batch through pgtest.FlatIngestSQL, prepared as
// kernel/journal prepares it (validation, canonical data, digest), in one
// round trip.
func flatIngest(ctx context.Context, p *pgxpool.Pool, evs []kernel.Event) error {
	n := len(evs)
	var (
		srcs, ids, projects, runs, types, actors = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		tss                                      = make([]time.Time, n)
		psrc, pid, opIDs                         = make([]*string, n), make([]*string, n), make([]*string, n)
		datas, digests                           = make([][]byte, n), make([][]byte, n)
		settles, open                            = make([]bool, n), make([]bool, n)
		ords                                     = make([]int32, n)
	)
	settled := map[[3]string]bool{}
	for i, e := range evs {
		pr, err := e.Prepare()
		if err != nil {
			return err
		}
		srcs[i], ids[i], projects[i], runs[i], types[i], actors[i], tss[i] = e.SourceID, e.EventID, e.Project, e.RunID, e.Type, e.Actor, e.TS
		if pr.OperationID != "" {
			opIDs[i] = &pr.OperationID
		}
		datas[i], digests[i], settles[i], ords[i] = pr.CanonicalData, pr.Digest, pr.Settles, int32(i)
		if pr.Settles {
			settled[[3]string{e.Project, e.RunID, pr.OperationID}] = true
		}
	}
	for i, e := range evs {
		open[i] = opIDs[i] == nil || !settled[[3]string{e.Project, e.RunID, *opIDs[i]}]
	}
	rows, err := p.Query(ctx, pgtest.FlatIngestSQL, srcs, ids, projects, runs, types, tss, actors, psrc, pid, datas, digests, opIDs, settles, open, ords)
	if err != nil {
		return fmt.Errorf("flat ingest: %w", err)
	}
	got := 0
	for rows.Next() {
		got++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("flat ingest: %w", err)
	}
	return allAccepted(n, got, func(int) bool { return true })
}
