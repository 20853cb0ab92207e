package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// agentEvent is an agent's tool.started in run of project acme, as POST
// /v1/events would write it.
func agentEvent(t *testing.T, run string) kernel.Event {
	t.Helper()
	ev, err := kernel.NewEvent("agent-x", run+"/op-1/started", "acme", run, kernel.TypeToolStarted, "agent", time.Now(),
		map[string]any{"operation_id": "op-1", "tool": "t", "args": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// issuesGateway is a gateway of project acme over a fresh schema, with
// one stdio issues server upstream.
func issuesGateway(t *testing.T) (*pgxpool.Pool, *fixture) {
	t.Helper()
	pool := newSchema(t)
	return pool, newFixture(t, pool, Config{Project: "acme", Servers: []mcptool.ServerConfig{stdioIssues("issues", t.TempDir()+"/issues.json")}})
}

// The gateway's runs are reckon's record: once the gateway has recorded a
// run, an agent's write into it (or into a run beneath it) is refused in
// the write's own transaction, whatever the caller checked before.
func TestAgentsCannotWriteIntoGatewayRuns(t *testing.T) {
	t.Parallel()
	pool, f := issuesGateway(t)
	cs := f.client()
	if res := callTool(t, cs, "create_issue", map[string]any{"title": "one"}, mcp.Meta{RunIDMeta: "host-8"}); res.IsError {
		t.Fatalf("call: %s", mcptool.ContentText(res.Content))
	}
	j := journal.New(pool, nil)
	for _, run := range []string{"host-8", "host-8" + kernel.ChildSeparator + "op-1"} {
		_, err := j.IngestAgentEvents(context.Background(), []kernel.Event{agentEvent(t, run)})
		if kernel.ErrorCode(err) != kernel.EForbidden || !strings.Contains(err.Error(), `run "host-8" of project "acme" is a run of the MCP gateway`) {
			t.Errorf("agent's write into %s: %v, want a refusal naming the gateway's run host-8", run, err)
		}
	}
	if _, err := j.IngestAgentEvents(context.Background(), []kernel.Event{agentEvent(t, "host-9")}); err != nil {
		t.Fatalf("a run the gateway has not recorded: %v", err)
	}
}

// A client-named run id is claimed under the lock an agent's write takes
// shared: a claim made while an agent's write into that run id is under
// way waits for it to commit, then sees its event and refuses the run id
// (without the lock the claim would see nothing yet, record the run, and
// the agent's event would land in the gateway's run).
func TestClaimWaitsForAnAgentsWriteUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, f := issuesGateway(t)
	cs := f.client()

	// The agent's write, held open: the refusal's shared lock
	// (reckon_refuse_kernel_runs, which IngestAgentEvents's check runs
	// ahead of its insert) and the event.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT reckon_refuse_kernel_runs($1::text[], $2::text[])`, []string{"acme"}, []string{"host-7"}); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.New(pool, nil).IngestTx(ctx, tx, []kernel.Event{agentEvent(t, "host-7")}); err != nil {
		t.Fatal(err)
	}

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_issue", Arguments: map[string]any{"title": "x"}, Meta: mcp.Meta{RunIDMeta: "host-7"}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// The call must wait on the run id's lock, not finish.
	deadline := time.Now().Add(20 * time.Second)
	for waiting := false; !waiting; {
		select {
		case res := <-done:
			t.Fatalf("the call finished while an agent's write into its run id was under way: %+v", res)
		case <-time.After(20 * time.Millisecond):
		}
		var n int
		if err := pool.QueryRow(ctx, runKeyWaitersSQL, "acme", "host-7").Scan(&n); err != nil {
			t.Fatal(err)
		}
		waiting = n > 0
		if time.Now().After(deadline) {
			t.Fatal("the call never waited for the run id's lock")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "already has events") {
		t.Fatalf("the call after the agent's write committed: %+v, want the run id refused", res)
	}
	var runs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM gateway_runs WHERE run_id = 'host-7'`).Scan(&runs); err != nil || runs != 0 {
		t.Fatalf("gateway_runs holds host-7 %d times (%v)", runs, err)
	}
	if n := len(ofRun(events(t, pool, "acme"), "host-7")); n != 0 {
		t.Fatalf("the refused call enqueued %d events in host-7", n)
	}
}

// runKeyWaitersSQL counts the sessions waiting for the run key of
// project $1, run $2 (claimRunKeySQL's key), in this database. pg_locks
// shows every database's locks and shows a bigint key split into classid
// (its high half) and objid (its low half). Counting every advisory waiter
// instead caught other tests' locks: when a parallel test also waited,
// "exactly two waiters" never held, and the test timed out after 30 s.
const runKeyWaitersSQL = `
SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1::text || '/' || $2::text, 0)`

// Two calls of one new client-named run at once, each from its own
// session: the second waits for the first's claim and then finds the run
// recorded, so both go through in the same run (op-1 and op-2, one
// run.started) rather than the second being refused as a run id already
// used. The test holds the run id's lock until both calls wait on it.
func TestConcurrentCallsOfANewRunShareIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, f := issuesGateway(t)
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, claimRunKeySQL, "acme", "host-6"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan string, 2)
	for range 2 {
		cs := f.client()
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_issue",
				Arguments: map[string]any{"title": "t"}, Meta: mcp.Meta{RunIDMeta: "host-6"}})
			switch {
			case err != nil:
				errs <- err.Error()
			case res.IsError:
				errs <- mcptool.ContentText(res.Content)
			default:
				errs <- ""
			}
		}()
	}
	waitFor(t, "both calls waiting for the run id's lock", func() bool {
		var n int
		if err := pool.QueryRow(ctx, runKeyWaitersSQL, "acme", "host-6").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n >= 2
	})
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if e := <-errs; e != "" {
			t.Errorf("call: %s", e)
		}
	}
	var started []string
	for _, r := range ofRun(events(t, pool, "acme"), "host-6") {
		if r.Type == kernel.TypeRunStarted || r.Type == kernel.TypeToolStarted {
			started = append(started, strings.TrimSpace(r.Type+" "+r.OperationID()))
		}
	}
	if got := strings.Join(started, ", "); got != "run.started, tool.started op-1, tool.started op-2" {
		t.Fatalf("run host-6: %s", got)
	}
}

// A kernel run recorded by its start, before its workflow has written any
// event, is not the gateway's to claim.
func TestClaimRefusesAKernelRunWithoutEvents(t *testing.T) {
	t.Parallel()
	pool, f := issuesGateway(t)
	if _, err := pool.Exec(context.Background(),
		`INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES ('acme', 'host-5', '{}', '\x00', 'reckon/acme/host-5')`); err != nil {
		t.Fatal(err)
	}
	res := callTool(t, f.client(), "create_issue", map[string]any{"title": "x"}, mcp.Meta{RunIDMeta: "host-5"})
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "already has events") {
		t.Fatalf("call in a kernel run's id: %s, want the run id refused", mcptool.ContentText(res.Content))
	}
	if n := len(ofRun(events(t, pool, "acme"), "host-5")); n != 0 {
		t.Fatalf("the refused call enqueued %d events in host-5", n)
	}
}

// A session run is its session's alone: another client that names it in
// _meta (it can read run ids in the listing, or guess one) is refused
// before anything is recorded or sent. Without the check the stranger's
// tool.started landed in the victim's run, outside the victim's session
// bookkeeping, so the victim's run.completed could precede it.
func TestSessionRunCannotBeNamedByAnotherSession(t *testing.T) {
	t.Parallel()
	pool, f := issuesGateway(t)
	victim := f.client()
	if res := callTool(t, victim, "create_issue", map[string]any{"title": "mine"}, nil); res.IsError {
		t.Fatalf("victim's call: %s", mcptool.ContentText(res.Content))
	}
	runID := events(t, pool, "acme")[0].RunID
	if !strings.HasPrefix(runID, "gw-") {
		t.Fatalf("victim's run %q is not a session run", runID)
	}
	res := callTool(t, f.client(), "create_issue", map[string]any{"title": "forged"}, mcp.Meta{RunIDMeta: runID})
	if !res.IsError || !strings.Contains(mcptool.ContentText(res.Content), "nothing was recorded or sent upstream") {
		t.Fatalf("call naming another session's run: %s, want it refused", mcptool.ContentText(res.Content))
	}
	if got := strings.Join(summary(ofRun(events(t, pool, "acme"), runID)), ", "); got != "run.started, tool.started op-1, tool.completed op-1" {
		t.Fatalf("victim's run %s: %s", runID, got)
	}
	// The session itself may name its own run.
	if res := callTool(t, victim, "create_issue", map[string]any{"title": "mine too"}, mcp.Meta{RunIDMeta: runID}); res.IsError {
		t.Fatalf("the session naming its own run: %s", mcptool.ContentText(res.Content))
	}
}
