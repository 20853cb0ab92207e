package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/platform/temporalx"
	"github.com/seed-7bc021c3/reckon/tool/sandbox"
)

// execMainEnv makes the test binary behave as the reckon binary: the crash
// test re-executes itself as `reckon worker`, a real separate process
// running the real command, without a second link of the whole binary.
const execMainEnv = "RECKON_TEST_EXEC_MAIN"

// connectTemporal connects to the tests' embedded Temporal server in
// namespace ns, closed when the test ends.
func connectTemporal(ctx context.Context, t *testing.T, ns string) *temporalx.Conn {
	t.Helper()
	conn, err := temporalx.Connect(ctx, temporalx.Config{Namespace: ns, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// processRig is what a test that runs reckon as a child process works
// against: a two-minute bound on the test, the tests' embedded Temporal
// server in namespace ns, and a fresh schema.
type processRig struct {
	ctx  context.Context
	conn *temporalx.Conn
	s    *pgtest.Schema
	ns   string
}

// newProcessRig connects namespace ns and creates the schema. Its context
// ends with the test (before the test's cleanups run, so a child started
// with exec.CommandContext is killed before a cleanup waits for it) or
// two minutes on, whichever is first.
func newProcessRig(t *testing.T, ns string) *processRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return &processRig{ctx: ctx, conn: connectTemporal(ctx, t, ns), s: pgtest.New(t), ns: ns}
}

// env is the environment of a reckon process on task queue queue (see
// reckonEnv), with its data in a fresh directory.
func (r *processRig) env(t *testing.T, queue string, extra ...string) []string {
	return reckonEnv(r.s.URL, r.conn, r.ns, queue, sandboxtest.Dir(t), extra...)
}

// reckonEnv is the environment of a reckon process the test starts from
// its own binary (execMainEnv), against the database at dbURL and the
// Temporal frontend of conn (namespace ns, task queue queue), keeping its
// data in dataDir; extra entries come after, and win.
func reckonEnv(dbURL string, conn *temporalx.Conn, ns, queue, dataDir string, extra ...string) []string {
	return append(append(os.Environ(),
		execMainEnv+"=1",
		"DATABASE_URL="+dbURL,
		"TEMPORAL_ADDRESS="+conn.Embedded.HostPort(),
		"TEMPORAL_NAMESPACE="+ns,
		"RECKON_TASK_QUEUE="+queue,
		"RECKON_DATA_DIR="+dataDir,
	), extra...)
}

func TestMain(m *testing.M) {
	if os.Getenv(execMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	// The in-process tests start the dev stack, publishers and servers;
	// none may outlive them (the embedded Temporal server's own goroutines
	// do, by design).
	reckontest.Main(m, reckontest.TemporalLeaks()...)
}

// TestWorkerSIGKILLDuringRunCommand kills a separate `reckon worker`
// process with SIGKILL while its run_command activity runs, 20 times at
// points spread before, during and after the command's effect. Every time:
// tool.started is journaled, no event is duplicated, the operation is not
// re-executed (one begin marker, at most one effect line per operation id),
// and the run ends visibly: tool.failed(uncertain) after the heartbeat
// timeout, or tool.completed when the kill came after the activity
// reported.
func TestWorkerSIGKILLDuringRunCommand(t *testing.T) {
	const kills = 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	conn := connectTemporal(ctx, t, "crash-test")
	b := reckontest.Setup(t, reckontest.Config{RealClock: true})
	s, j := b.Schema, b.Journal
	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		_ = outbox.NewPublisher(s.Pool, j, outbox.Config{PollInterval: 20 * time.Millisecond}, nil, zerolog.Nop()).Run(pubCtx)
	}()
	defer func() { stopPub(); <-pubDone }()

	_, bwrapErr := exec.LookPath("bwrap")
	unconfined := bwrapErr != nil
	dataDir := sandboxtest.Dir(t)
	queue := fmt.Sprintf("crash-%d", time.Now().UnixNano())
	c := &crashRig{conn: conn, pool: s.Pool, starter: &runner.Starter{
		Pool: s.Pool, Journal: j, Client: conn.Client, TaskQueue: queue, DataDir: dataDir,
		Tools: runner.NewTools(sandbox.NewRunCommand(sandbox.Config{Unconfined: unconfined})),
		// A killed worker stops heartbeating; the server notices within 1s.
		Timeouts: runner.Timeouts{ToolHeartbeat: time.Second, ToolStartToClose: 30 * time.Second},
	}}
	c.env = reckonEnv(s.URL, conn, "crash-test", queue, dataDir,
		"RECKON_LOG_LEVEL=error",
		"RECKON_TOKENS=",
		"KERNEL_FAULT_AFTER_EFFECT=",
		"KERNEL_FAULT_BEFORE_EFFECT=",
	)
	if unconfined {
		c.env = append(c.env, "RECKON_SANDBOX_UNCONFINED=1")
	}
	defer func() {
		if t.Failed() {
			t.Logf("worker output:\n%s", c.logs.String())
		}
	}()

	runs := make([]string, kills)
	for i := range kills {
		runs[i] = fmt.Sprintf("crash-%02d", i)
		c.killMidCommand(ctx, t, runs[i], time.Duration(i%10)*60*time.Millisecond)
	}

	// A surviving worker lets every run observe its fate.
	final := c.startWorker(t)
	defer func() { _ = final.Process.Kill(); _ = final.Wait() }()

	var effects, completed int
	for _, id := range runs {
		effected, done := c.checkRun(ctx, t, id)
		if effected {
			effects++
		}
		if done {
			completed++
		}
	}
	var outboxRows, journalRows int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel_event_outbox`).Scan(&outboxRows); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM journal_events WHERE project = 'crash' AND run_id LIKE 'crash-%'`).Scan(&journalRows); err != nil {
		t.Fatal(err)
	}
	if outboxRows != journalRows {
		t.Errorf("outbox holds %d events, journal %d", outboxRows, journalRows)
	}
	t.Logf("%d kills: %d after the effect landed (%d of them after the activity reported: tool.completed), %d before it; %d events journaled",
		kills, effects, completed, kills-effects, journalRows)
}

// crashRig starts runs of crashPlan and the `reckon worker` processes that
// execute them, for TestWorkerSIGKILLDuringRunCommand.
type crashRig struct {
	conn    *temporalx.Conn
	pool    *pgxpool.Pool
	starter *runner.Starter
	env     []string
	logs    reckontest.Buffer
}

// crashPlan: begin → 0.2s → effect → 0.3s → exit: kills 0-540ms after
// begin land before the effect, between effect and exit, and after the
// command.
var crashPlan = runner.Plan{Steps: []runner.Step{{Tool: kernel.ToolRunCommand, Args: []byte(
	`{"command": "echo begin >> marker.txt; sleep 0.2; echo \"$RECKON_OPERATION_ID\" >> effects.txt; sleep 0.3", "timeout_s": 20}`)}}}

func (c *crashRig) startWorker(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "worker")
	cmd.Env = c.env
	cmd.Stderr = &c.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// killMidCommand starts a worker and run id, and kills the worker with
// SIGKILL after the run's command began and delay passed.
func (c *crashRig) killMidCommand(ctx context.Context, t *testing.T, id string, delay time.Duration) {
	t.Helper()
	w := c.startWorker(t)
	if _, _, err := c.starter.Start(ctx, runner.StartParams{Project: "crash", RunID: id, Plan: crashPlan}); err != nil {
		t.Fatal(err)
	}
	ws, _ := c.starter.Workspace("crash", id)
	// Wait for the marker's content, not its existence: the shell
	// creates marker.txt when it opens it for append, a moment before
	// echo writes, and a kill in between leaves an empty file.
	for {
		if b, err := os.ReadFile(filepath.Join(ws, "marker.txt")); err == nil && len(b) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("run %s: the command never began", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(delay)
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w.Wait()
}

// checkRun waits for run id to end and its events to be delivered, then
// checks its fate: events once each, the command begun once, at most one
// effect, and an end that says what happened. It reports whether the
// effect landed and whether the operation completed.
func (c *crashRig) checkRun(ctx context.Context, t *testing.T, id string) (effected, completed bool) {
	t.Helper()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	runErr := c.conn.Client.GetWorkflow(wctx, kernel.WorkflowID("crash", id), "").Get(wctx, nil)
	if wctx.Err() != nil {
		t.Fatalf("%s: the run did not end within 60s (%v)\n%s", id, runErr, crashDiagnosis(ctx, c.conn, c.pool, id))
	}
	wcancel()
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	if err := outbox.WaitDelivered(dctx, c.pool, "crash", id, 20*time.Millisecond); err != nil {
		t.Fatalf("%s: %v\n%s", id, err, crashDiagnosis(ctx, c.conn, c.pool, id))
	}
	dcancel()
	view, err := c.starter.View(ctx, "crash", id, runner.EventPage{})
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := c.starter.Workspace("crash", id)
	marker, _ := os.ReadFile(filepath.Join(ws, "marker.txt"))
	eff, _ := os.ReadFile(filepath.Join(ws, "effects.txt"))

	count := map[string]int{}
	var failed kernel.ToolFailed
	for _, ev := range view.Events {
		count[ev.Type+" "+ev.OperationID()]++
		if ev.Type == kernel.TypeToolFailed {
			_ = ev.DecodeData(&failed)
		}
	}
	for k, n := range count {
		if n > 1 {
			t.Errorf("%s: %q journaled %d times", id, k, n)
		}
	}
	if count["tool.started op-1"] != 1 {
		t.Errorf("%s: tool.started op-1 not journaled: %v", id, count)
	}
	if len(count) != 4 {
		t.Errorf("%s: want run.started, one operation and its end, run end; got %v", id, count)
	}
	if string(marker) != "begin\n" {
		t.Errorf("%s: the command began %d times (marker %q): an operation was re-executed", id, strings.Count(string(marker), "begin"), marker)
	}
	if e := string(eff); e != "" && e != "op-1\n" {
		t.Errorf("%s: effects %q: want at most one effect, by op-1", id, e)
	}
	switch {
	case count["tool.completed op-1"] == 1:
		completed = true
		if runErr != nil || view.Status != runner.StatusCompleted || string(eff) != "op-1\n" {
			t.Errorf("%s: tool.completed but run %s (%v), effects %q", id, view.Status, runErr, eff)
		}
	case count["tool.failed op-1"] == 1:
		if failed.Effect != kernel.EffectUncertain || failed.ErrorType != kernel.ErrorTypeActivityFailed {
			t.Errorf("%s: tool.failed %+v, want activity_failed effect=uncertain", id, failed)
		}
		if runErr == nil || view.Status != runner.StatusFailed || count["run.failed "] != 1 {
			t.Errorf("%s: uncertain failure but run %s (%v)", id, view.Status, runErr)
		}
	default:
		t.Errorf("%s: operation never ended: %v", id, count)
	}
	return len(eff) > 0, completed
}

// crashDiagnosis describes a crash run that did not settle in time: its
// outbox rows and its workflow history, so a failure names the stuck part
// (the workflow, the delivery) instead of only a timeout.
func crashDiagnosis(ctx context.Context, conn *temporalx.Conn, pool *pgxpool.Pool, id string) string {
	var b strings.Builder
	rows, err := pool.Query(ctx, `SELECT id, source_id, event_id, attempts,
	    coalesce((SELECT u.next_attempt_at FROM kernel_event_outbox_undelivered u WHERE u.id = o.id) - now(), interval '0'),
	    coalesce(last_error, ''),
	    parked_at IS NULL AND id NOT IN (SELECT id FROM kernel_event_outbox_undelivered), parked_at IS NOT NULL
	  FROM kernel_event_outbox o WHERE event->>'project' = 'crash' AND event->>'run_id' = $1 ORDER BY id`, id)
	if err != nil {
		fmt.Fprintf(&b, "outbox: %v\n", err)
	} else {
		for rows.Next() {
			var rid int64
			var src, evID, lastErr string
			var attempts int
			var due time.Duration
			var delivered, parked bool
			if err := rows.Scan(&rid, &src, &evID, &attempts, &due, &lastErr, &delivered, &parked); err != nil {
				fmt.Fprintf(&b, "outbox scan: %v\n", err)
				break
			}
			fmt.Fprintf(&b, "outbox %d %s/%s attempts=%d due_in=%s delivered=%v parked=%v err=%q\n", rid, src, evID, attempts, due, delivered, parked, lastErr)
		}
		rows.Close()
	}
	var pending int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM kernel_event_outbox_undelivered`).Scan(&pending)
	fmt.Fprintf(&b, "outbox rows pending in all runs: %d\n", pending)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	it := conn.Client.GetWorkflowHistory(hctx, kernel.WorkflowID("crash", id), "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			fmt.Fprintf(&b, "history: %v\n", err)
			break
		}
		fmt.Fprintf(&b, "history %d %s %s\n", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), ev.GetEventType())
	}
	return b.String()
}

// A SIGHUP meant for the API's token reload (`pkill -HUP reckon`) does
// not end a worker: by default it would, in the middle of its calls. The
// worker logs that it has nothing to reload and keeps running; SIGTERM
// still stops it cleanly.
func TestWorkerSurvivesSIGHUP(t *testing.T) {
	t.Parallel()
	r := newProcessRig(t, "hangup-test")
	ctx := r.ctx
	var logs reckontest.Buffer
	cmd := exec.Command(os.Args[0], "worker")
	cmd.Env = r.env(t, "hangup-test",
		"RECKON_LOG_LEVEL=info",
		"RECKON_TOKENS=",
	)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("worker output:\n%s", logs.String())
		}
	}()
	waitLog := func(want string) {
		t.Helper()
		for !strings.Contains(logs.String(), want) {
			select {
			case err := <-exited:
				t.Fatalf("the worker exited (%v) before logging %q", err, want)
			case <-ctx.Done():
				t.Fatalf("no %q in the worker's log", want)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitLog("executing runs from task queue")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("nothing to reload")
	select {
	case err := <-exited:
		t.Fatalf("the worker exited after SIGHUP: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM the worker exited with %v, want 0", err)
		}
	case <-ctx.Done():
		t.Fatal("the worker did not stop on SIGTERM")
	}
}
