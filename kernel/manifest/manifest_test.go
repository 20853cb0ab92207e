package manifest

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
)

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func take(t *testing.T, dir string, o Options) Manifest {
	t.Helper()
	m, err := Take(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCompareNamesEveryKindOfChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "keep.txt", "keep")
	write(t, dir, "edit.txt", "aaaa")
	write(t, dir, "gone.txt", "bye")
	before := take(t, dir, Options{})
	if before.Truncated != "" || len(before.Entries) != 3 {
		t.Fatalf("before: %+v", before)
	}
	if again := take(t, dir, Options{HashAlso: before.Hashed()}); !Compare(before, again).Equal() || again.Digest() != before.Digest() {
		t.Fatalf("an unchanged workspace compares unequal: %+v", Compare(before, again))
	}
	// Same size, same content length, mtime forged back: ctime (or, in the
	// same tick, the content hash) still tells.
	write(t, dir, "edit.txt", "bbbb")
	old := time.Unix(0, before.Entries[0].Mtime)
	if err := os.Chtimes(filepath.Join(dir, "edit.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "new/deep.txt", "x")
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	after := take(t, dir, Options{HashAlso: before.Hashed()})
	d := Compare(before, after)
	got := map[string]string{}
	for _, c := range d.Changes {
		got[c.Path] = c.Kind
	}
	want := map[string]string{"edit.txt": Modified, "gone.txt": Removed, "new": Created, "new/deep.txt": Created}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
}

func TestRecentFilesAreHashedAndOldOnesNot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "old.txt", "old")
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "old.txt"), long, long); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "fresh.txt", "fresh")
	// ctime of old.txt is recent too (Chtimes sets it): walk an hour later.
	later := func() time.Time { return time.Now().Add(time.Hour) }
	m := take(t, dir, Options{Now: later})
	for _, e := range m.Entries {
		if e.SHA256 != "" {
			t.Fatalf("%s hashed an hour after its last change", e.Path)
		}
	}
	m = take(t, dir, Options{})
	for _, e := range m.Entries {
		if e.SHA256 == "" {
			t.Fatalf("%s changed just now but not hashed", e.Path)
		}
	}
	if s := m.Summary(); s.Files != 2 || s.Hashed != 2 || s.Bytes != 8 {
		t.Fatalf("summary %+v", s)
	}
}

func TestCapsTruncate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		write(t, dir, n, n)
	}
	if m := take(t, dir, Options{Limits: Limits{MaxFiles: 2}}); m.Truncated == "" {
		t.Fatal("3 entries under a cap of 2 not truncated")
	}
	clock := time.Now()
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	if m := take(t, dir, Options{Limits: Limits{Budget: 1500 * time.Millisecond}, Now: tick}); m.Truncated == "" {
		t.Fatal("walk over budget not truncated")
	}
}

func TestSymlinksAreRecordedNotFollowed(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	write(t, outside, "secret/x", "x")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	m := take(t, dir, Options{})
	if len(m.Entries) != 1 || m.Entries[0].Type != TypeSymlink || m.Entries[0].Link == "" {
		t.Fatalf("entries %+v", m.Entries)
	}
	if _, err := Take(context.Background(), filepath.Join(dir, "link"), Options{}); err == nil {
		t.Fatal("Take followed a symlinked workspace")
	}
}

func TestStoreFirstWriteWins(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	st := Store{Pool: s.Pool}
	ctx := context.Background()
	dir := t.TempDir()
	write(t, dir, "a", "a")
	first := take(t, dir, Options{})
	k := Key{Project: "p", RunID: "r", OperationID: "op-1", Phase: PhaseBefore}
	got, err := st.Put(ctx, k, first)
	if err != nil || got.Digest() != first.Digest() {
		t.Fatalf("put: %v", err)
	}
	write(t, dir, "b", "b")
	second := take(t, dir, Options{})
	got, err = st.Put(ctx, k, second)
	if err != nil || got.Digest() != first.Digest() {
		t.Fatalf("second put replaced the first (%v)", err)
	}
	if _, ok, err := st.Get(ctx, Key{Project: "p", RunID: "r", OperationID: "op-1", Phase: PhaseAfter}); ok || err != nil {
		t.Fatalf("after phase: ok=%v err=%v", ok, err)
	}
	if l, ok, err := st.Latest(ctx, "p", "r"); !ok || err != nil || l.Digest() != first.Digest() {
		t.Fatalf("latest: ok=%v err=%v", ok, err)
	}
}

func TestNonUTF8NameTruncates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "a\xff", "x")
	if m := take(t, dir, Options{}); m.Truncated == "" {
		t.Fatalf("a name JSON cannot hold exactly must leave the manifest incomplete: %+v", m)
	}
	dir = t.TempDir()
	if err := os.Symlink("t\xfe", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if m := take(t, dir, Options{}); m.Truncated == "" {
		t.Fatalf("a symlink target JSON cannot hold exactly must leave the manifest incomplete: %+v", m)
	}
}

func TestBudgetBoundsHashing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "big", string(make([]byte, 1<<20))) // recent, so hashed
	clock := time.Now()
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	// One entry passes the per-entry check; only the hash's reads can
	// notice the budget is spent.
	if m := take(t, dir, Options{Limits: Limits{Budget: 1500 * time.Millisecond}, Now: tick}); m.Truncated == "" {
		t.Fatalf("hashing past the budget not truncated: %+v", m)
	}
}

// TestPruneUsesTheIndex: a retention batch finds its rows through
// kernel_workspace_manifests_taken_at (migration 00026), not by scanning a
// table whose rows hold whole workspaces.
func TestPruneUsesTheIndex(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	if plan := s.Plan(t, pruneSQL, 3600.0, 500); !strings.Contains(plan, "kernel_workspace_manifests_taken_at") {
		t.Errorf("the prune does not use the taken_at index:\n%s", plan)
	}
}

// A workspace nested deeper than maxDepth (a sandboxed command makes one in
// moments) is truncated, not walked to the bottom: the walk holds one
// descriptor per level, and thousands of levels would take the worker's
// whole descriptor limit from everything else it does meanwhile.
func TestTakeStopsAtMaxDepth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		depth     int
		truncated bool
	}{{maxDepth, false}, {maxDepth + 1, true}, {3 * maxDepth, true}} {
		dir := t.TempDir()
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Level by level from the last: the path passes PATH_MAX.
		for i := 0; i < tc.depth; i++ {
			if err := unix.Mkdirat(fd, "a", 0o755); err != nil {
				t.Fatal(err)
			}
			next, err := unix.Openat(fd, "a", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			fd = next
		}
		unix.Close(fd)
		m := take(t, dir, Options{})
		if got := m.Truncated != ""; got != tc.truncated {
			t.Fatalf("depth %d: truncated %q, want truncated %v", tc.depth, m.Truncated, tc.truncated)
		}
		if tc.truncated && !strings.Contains(m.Truncated, "levels") {
			t.Fatalf("depth %d: truncated %q does not say why", tc.depth, m.Truncated)
		}
		if len(m.Entries) > maxDepth+1 {
			t.Fatalf("depth %d: %d entries, the walk went below %d levels", tc.depth, len(m.Entries), maxDepth)
		}
	}
}
