package temporalx

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func echoWorkflow(ctx workflow.Context, s string) (string, error) { return "echo:" + s, nil }

// runEcho runs a one-line workflow through conn, proving the server serves
// history, matching and frontend for real.
func runEcho(t *testing.T, c client.Client, queue, id string) {
	t.Helper()
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(echoWorkflow)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, echoWorkflow, "hi")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "echo:hi" {
		t.Fatalf("workflow returned %q", got)
	}
}

func TestEmbeddedInMemory(t *testing.T) {
	conn, err := Connect(context.Background(), Config{Namespace: "reckon-test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if conn.Embedded == nil {
		t.Fatal("no TEMPORAL_ADDRESS but no embedded server")
	}
	runEcho(t, conn.Client, "q-mem", "wf-mem")
}

// TestEmbeddedSQLiteFilePersists restarts the server on the same SQLite
// file and finds the first run's history still there.
func TestEmbeddedSQLiteFilePersists(t *testing.T) {
	dir := t.TempDir()
	conn, err := Connect(context.Background(), Config{DataDir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	runEcho(t, conn.Client, "q-file", "wf-file")
	conn.Close()
	if _, err := os.Stat(DBFile(dir)); err != nil {
		t.Fatalf("no SQLite file after the first server: %v", err)
	}

	// The restarted server logs neither failure of a restart: the previous
	// start's cluster members (other ports) are forgotten, so matching and
	// history never lack hosts, and calls refused while the frontend starts
	// are not logged as errors. (Other errors are not asserted: a loaded
	// machine may log transient ones that say nothing about restarts.)
	var errs lockedBuffer
	conn2, err := Connect(context.Background(), Config{DataDir: dir, Log: zerolog.New(&errs)})
	if err != nil {
		t.Fatalf("restart on the same SQLite file: %v", err)
	}
	defer conn2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := conn2.Client.DescribeWorkflowExecution(ctx, "wf-file", "")
	if err != nil {
		t.Fatalf("history of the first server's run is gone: %v", err)
	}
	if s := d.GetWorkflowExecutionInfo().GetStatus().String(); s != "Completed" {
		t.Fatalf("status after restart = %s, want Completed", s)
	}
	runEcho(t, conn2.Client, "q-file", "wf-file-2")
	// Stale members made matching and history refuse calls for the first
	// seconds after a restart; give them that long to show.
	time.Sleep(2 * time.Second)
	for _, sign := range []string{"Not enough hosts", "Frontend is not healthy yet"} {
		if got := errs.String(); strings.Contains(got, sign) {
			t.Fatalf("restarted server logged %q:\n%s", sign, got)
		}
	}
}

// lockedBuffer collects log lines written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

func TestSDKLoggerFields(t *testing.T) {
	var buf lockedBuffer
	l := SDKLogger(zerolog.New(&buf))
	l.Info("hello", "WorkflowID", "w1", "Attempt", 2)
	if got := buf.String(); got != `{"level":"info","workflow_id":"w1","attempt":2,"message":"hello"}`+"\n" {
		t.Fatalf("log line = %s", got)
	}
}

// TestFreePortsSkipsReservedPorts: a port another server reserved is never
// handed out, though nothing listens on it yet (the server binds its ports
// only later), and it is handed out again once released.
func TestFreePortsSkipsReservedPorts(t *testing.T) {
	t.Parallel()
	// Ten ports that can be bound right now, each reservable.
	var lo int
	for base := 20000 + rand.IntN(10000); ; base++ {
		if base > 32000 {
			t.Fatal("no ten consecutive free ports between 20000 and 32000")
		}
		if allFree(base, 10) {
			lo = base
			break
		}
	}
	held, res, err := freePortsIn(localhost, 5, lo, lo+10)
	if err != nil {
		t.Fatal(err)
	}
	rest, res2, err := freePortsIn(localhost, 5, lo, lo+10)
	if err != nil {
		t.Fatalf("the five ports not reserved: %v", err)
	}
	for _, p := range rest {
		if slices.Contains(held, p) {
			t.Errorf("port %d handed out twice: %v and %v", p, held, rest)
		}
	}
	if _, _, err := freePortsIn(localhost, 1, lo, lo+10); err == nil {
		t.Error("an eleventh port was handed out from a range of ten, all reserved")
	}
	res.release()
	again, res3, err := freePortsIn(localhost, 5, lo, lo+10)
	if err != nil {
		t.Fatalf("released ports not handed out again: %v", err)
	}
	slices.Sort(again)
	slices.Sort(held)
	if !slices.Equal(again, held) {
		t.Errorf("after release got %v, want the released %v", again, held)
	}
	res2.release()
	res3.release()
	res3.release() // twice is harmless
}

// allFree says whether ports lo … lo+n-1 can be bound and are not reserved.
func allFree(lo, n int) bool {
	for p := lo; p < lo+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort(localhost, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		_ = l.Close()
		lock, ok := reservePort(p)
		if !ok {
			return false
		}
		lock.release()
	}
	return true
}

// TestReservePortFollowsNoLink: a port file another user planted as a
// symbolic link is not opened through it (the target is never created or
// locked); the port is then taken on the listen check alone. Not parallel:
// it points the shared lock directory elsewhere for its duration.
func TestReservePortFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	old := portLockDir
	portLockDir = dir
	defer func() { portLockDir = old }()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.Symlink(target, filepath.Join(dir, "12345")); err != nil {
		t.Fatal(err)
	}
	lock, ok := reservePort(12345)
	if !ok || lock.f != nil {
		t.Fatalf("reservePort through a link: locked %v, free %v; want free, unlocked", lock.f != nil, ok)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("the link's target was created: %v", err)
	}
	// A plain file is locked as usual, and a second reservation refused.
	first, ok := reservePort(12346)
	if !ok || first.f == nil {
		t.Fatal("a fresh port file was not locked")
	}
	defer first.release()
	if _, ok := reservePort(12346); ok {
		t.Fatal("a locked port was reserved twice")
	}
}
