package triage

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// stepClock stands still but for what a test advances it by, so that a
// lease expires when the test says, however long its sweeps take.
type stepClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.at = c.at.Add(d)
	c.mu.Unlock()
}

// seedProjects journals, in each project, a finished run with one
// uncertain operation.
func (e *env) seedProjects(projects []string, run string) {
	e.t.Helper()
	var evs []kernel.Event
	for _, p := range projects {
		ev := func(id, typ string, ts time.Time, data any) kernel.Event {
			x, err := kernel.NewEvent(kernel.SourceKernel, p+"/"+run+"/"+id, p, run, typ, kernel.ActorKernel, ts, data)
			if err != nil {
				e.t.Fatal(err)
			}
			return x
		}
		evs = append(evs,
			ev("run/started", kernel.TypeRunStarted, e.t0, map[string]any{}),
			ev("op-1/started", kernel.TypeToolStarted, e.t0.Add(time.Second),
				map[string]any{"operation_id": "op-1", "tool": "run_command", "args": map[string]any{"command": "echo"}}),
			ev("op-1/failed", kernel.TypeToolFailed, e.t0.Add(2*time.Second),
				kernel.ToolFailed{OperationID: "op-1", ErrorType: kernel.ErrorTypeInjectedFault, Error: "worker lost", Effect: kernel.EffectUncertain}),
			ev("run/failed", kernel.TypeRunFailed, e.t0.Add(time.Minute), kernel.RunFailed{Error: "stopped"}))
	}
	e.ingest(evs...)
}

// sweptProjects are the projects a sharded sweep journaled walls in.
func sweptProjects(t *testing.T, sw *Sweeper) []string {
	t.Helper()
	rep, err := sw.Sweep(context.Background(), SweepParams{Sharded: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range rep.Walls {
		if w.Outcome != OutcomeJournaled {
			t.Fatalf("wall %s/%s: %s %s", w.Project, w.RunID, w.Outcome, w.Error)
		}
		out = append(out, w.Project)
	}
	if rep.Projects != len(out) {
		t.Fatalf("sweep counted %d projects, journaled walls in %d", rep.Projects, len(out))
	}
	sort.Strings(out)
	return out
}

// claimed is the buckets a sweeper holds now, sorted.
func claimed(t *testing.T, sw *Sweeper) []int {
	t.Helper()
	mine, err := sw.Claim(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for b := range mine {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// Two pipeline processes split a sweep: each sweeps a disjoint, non-empty
// share of the projects, together all of them. One that stops renewing
// (it died) keeps its projects until its leases expire, and no longer:
// the other's first renewal after that takes them, and its next sweep
// triages them.
func TestSweepLeasesSplitAndHandOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	projects := ids("proj-", 24)
	e.seedProjects(projects, "run-1")
	clock := &stepClock{at: time.Now()}
	const lease = 30 * time.Second
	sweeper := func(holder string) *Sweeper {
		return e.sweeper(Config{Now: clock.now, Shard: &Shard{Leases: e.ops, Holder: holder, Lease: lease}})
	}
	a, b := sweeper("a"), sweeper("b")

	// a, alone, holds every bucket; b's arrival makes a give up half at
	// its next renewal, and b takes them at its own.
	if got := claimed(t, a); len(got) != SweepBuckets {
		t.Fatalf("a alone holds %d buckets, want %d", len(got), SweepBuckets)
	}
	if got := claimed(t, b); len(got) != 0 {
		t.Fatalf("b took %d buckets a holds", len(got))
	}
	ha, hb := claimed(t, a), claimed(t, b)
	if len(ha) != SweepBuckets/2 || len(hb) != SweepBuckets/2 || slices.ContainsFunc(ha, func(x int) bool { return slices.Contains(hb, x) }) {
		t.Fatalf("shares a %v, b %v: want two disjoint halves", ha, hb)
	}

	sa, sb := sweptProjects(t, a), sweptProjects(t, b)
	if len(sa) == 0 || len(sb) == 0 {
		t.Fatalf("a swept %v, b swept %v: want both a share", sa, sb)
	}
	if both := slices.Concat(sa, sb); len(both) != len(projects) || !sameSet(both, projects) {
		t.Fatalf("a swept %v and b %v: want every project once", sa, sb)
	}
	t.Logf("a swept %d projects, b %d", len(sa), len(sb))
	e.drain()

	// a dies: it renews no more. Fresh operations in every project.
	e.seedProjects(projects, "run-2")
	clock.advance(lease - time.Second)
	if got := claimed(t, b); len(got) != SweepBuckets/2 {
		t.Fatalf("b holds %d buckets while a's leases last, want %d", len(got), SweepBuckets/2)
	}
	clock.advance(time.Second)
	if got := claimed(t, b); len(got) != SweepBuckets {
		t.Fatalf("b holds %d buckets once a's leases expired, want all %d", len(got), SweepBuckets)
	}
	if got := sweptProjects(t, b); !sameSet(got, projects) {
		t.Fatalf("b swept %v after a died, want every project", got)
	}
}

// sameSet says a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// The schedule claims its share before its first sweep, renews it every
// third of the lease (so that a second process gets half within a few
// renewals), and gives it up when it stops, so that the other takes it
// all at its next renewal rather than when the leases expire.
func TestScheduleRenewsAndLeavesItsShare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const lease = 3 * time.Second
	holds := func(holder string) int {
		var n int
		if err := e.s.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM sweep_leases WHERE holder = $1 AND expires_at > now()`, holder).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	start := func(holder string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		sw := e.sweeper(Config{Shard: &Shard{Leases: e.ops, Holder: holder, Lease: lease}})
		done := make(chan error, 1)
		go func() { done <- sw.RunSchedule(ctx, "@every 1h", SweepParams{}) }()
		var once sync.Once
		return func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
		}
	}
	stopA := start("a")
	defer stopA()
	reckontest.Eventually(t, 10*time.Second, "a holds every bucket", func() bool { return holds("a") == SweepBuckets })
	stopB := start("b")
	defer stopB()
	reckontest.Eventually(t, 20*time.Second, "a and b hold half each", func() bool {
		return holds("a") == SweepBuckets/2 && holds("b") == SweepBuckets/2
	})
	stopA()
	if n := holds("a"); n != 0 {
		t.Fatalf("a still holds %d buckets after it stopped", n)
	}
	reckontest.Eventually(t, 10*time.Second, "b holds every bucket", func() bool { return holds("b") == SweepBuckets })
}

// ProjectBucket spreads projects over every bucket, and hashes alike in
// every process.
func TestProjectBucket(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for i := range 1000 {
		b := ProjectBucket(fmt.Sprintf("project-%d", i))
		if b < 0 || b >= SweepBuckets {
			t.Fatalf("bucket %d out of range", b)
		}
		seen[b] = true
	}
	if len(seen) != SweepBuckets {
		t.Fatalf("1000 projects hash onto %d of %d buckets", len(seen), SweepBuckets)
	}
	// Pinned: a change of hash would split a fleet of mixed versions.
	if got := ProjectBucket("acme"); got != 47 {
		t.Fatalf("bucket of acme %d, want 47 (FNV-1a mod 64)", got)
	}
}
