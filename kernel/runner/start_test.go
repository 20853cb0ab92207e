package runner

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
)

// gatedClient holds the workflow start until open says so.
type gatedClient struct {
	client.Client
	open func() bool
}

func (c *gatedClient) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	for !c.open() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return c.Client.ExecuteWorkflow(ctx, o, wf, args...)
}

// TestIdenticalStartsWaitWithoutConnections: a burst of identical starts
// in one process waits for its turn without holding a pool connection
// each (which could take the whole pool from every other request): while
// the first start is inside Temporal with all the others waiting, the
// starts hold one connection, and they all answer the one run, created
// once.
func TestIdenticalStartsWaitWithoutConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	const n = 8
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := e.pool.Pool.Config()
	cfg.MaxConns = n + 2 // room for every start to hold one
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	runID := "burst-1"
	key := e.project + "\x00" + runID
	waiting := func() int {
		startTurns.mu.Lock()
		defer startTurns.mu.Unlock()
		if t := startTurns.turns[key]; t != nil {
			return t.users
		}
		return 0
	}
	s := *e.starter
	s.Pool = pool
	// Open once every start is in: the first start waits inside Temporal
	// for the other seven to line up behind it (or, were they to wait on
	// the database's lock instead, to hold a connection each). At that
	// moment the starts must hold the first one's connection only.
	var opened atomic.Bool
	var heldAtOpen atomic.Int32
	s.Client = &gatedClient{Client: e.starter.Client, open: func() bool {
		if !opened.Load() && (waiting() == n || pool.Stat().AcquiredConns() == n) {
			heldAtOpen.Store(pool.Stat().AcquiredConns())
			opened.Store(true)
		}
		return opened.Load()
	}}
	plan := Plan{Steps: []Step{{Tool: "run_command", Args: json.RawMessage(`{"command":"true"}`)}}}

	var wg sync.WaitGroup
	var createdN atomic.Int32
	for range n {
		wg.Go(func() {
			id, created, err := s.Start(ctx, StartParams{Project: e.project, RunID: runID, Plan: plan})
			if err != nil || id != runID {
				t.Errorf("start: %q %v", id, err)
			}
			if created {
				createdN.Add(1)
			}
		})
	}
	wg.Wait()
	if got := heldAtOpen.Load(); got != 1 {
		t.Errorf("%d identical starts held %d pool connections at once, want 1", n, got)
	}
	if got := createdN.Load(); got != 1 {
		t.Errorf("%d starts answered created, want 1", got)
	}
	if got := waiting(); got != 0 {
		t.Errorf("the turnstile still lists the run id with %d users", got)
	}
	// The run's workflow is still working in the workspace: the test's
	// data directory is removed only after it has ended.
	if err := e.wait(ctx, runID); err != nil {
		t.Errorf("run %s: %v", runID, err)
	}
}

// TestTurnstileGivesUp: a start waiting for its turn gives up when its
// context ends, and leaves the turn to the others.
func TestTurnstileGivesUp(t *testing.T) {
	t.Parallel()
	ts := turnstile{turns: map[string]*turn{}}
	release, err := ts.take(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ts.take(ctx, "k"); err == nil {
		t.Fatal("a canceled wait took a held turn")
	}
	release()
	again, err := ts.take(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	again()
	if len(ts.turns) != 0 {
		t.Fatalf("%d keys left", len(ts.turns))
	}
}
