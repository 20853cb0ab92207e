package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/internal/apptest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

// TestFailedStartLeavesNoRow: a start whose workflow Temporal refuses
// takes back its kernel_runs row (the id is free, GET and the next start
// agree), and a retried start that does start the workflow says created.
func TestFailedStartLeavesNoRow(t *testing.T) {
	t.Parallel()
	st := startStack(t, fault.Config{})
	ctx := context.Background()
	broken := *st.Kernel.Starter
	broken.TaskQueue = "" // Temporal refuses a start without a task queue
	plan := runner.Plan{Steps: []runner.Step{{Tool: "run_command", Args: json.RawMessage(`{"command":"true"}`)}}}
	req := runner.StartParams{Project: "acme", RunID: "fails-1", Plan: plan}
	if _, _, err := broken.Start(ctx, req); err == nil {
		t.Fatal("start without a task queue succeeded")
	}
	var n int
	if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel_runs WHERE run_id = 'fails-1'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a failed start left %d kernel_runs rows (%v)", n, err)
	}
	// A start recorded but never started (an earlier process died between
	// the two): the retry that starts it reports created, not "nothing new".
	planJSON, _ := json.Marshal(plan)
	digest, err := plan.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `INSERT INTO kernel_runs (project, run_id, plan, plan_digest, workflow_id) VALUES ('acme', 'half-1', $1, $2, $3)`,
		planJSON, digest, kernel.WorkflowID("acme", "half-1")); err != nil {
		t.Fatal(err)
	}
	if _, created, err := st.Kernel.Starter.Start(ctx, runner.StartParams{Project: "acme", RunID: "half-1", Plan: plan}); err != nil || !created {
		t.Fatalf("start of a recorded, never started run: created=%v err=%v, want created", created, err)
	}
	_, created, err := st.Kernel.Starter.Start(ctx, runner.StartParams{Project: "acme", RunID: "fails-1", Plan: plan})
	if err != nil || !created {
		t.Fatalf("start after the failed one: created=%v err=%v", created, err)
	}
	_, created, err = st.Kernel.Starter.Start(ctx, runner.StartParams{Project: "acme", RunID: "fails-1", Plan: plan})
	if err != nil || created {
		t.Fatalf("repeated start: created=%v err=%v, want false", created, err)
	}
}

// TestLiveDrill is the kernel's live drill end to end on a real embedded
// Temporal server, the real worker and sandbox, and the real API: a run
// whose run_command is faulted after its effect (KERNEL_FAULT_AFTER_EFFECT
// = run_command) surfaces as failed_uncertain; the operator finds the file
// in the workspace and reconciles effect=occurred citing it; the listing
// clears and the history shows the chain. The verdict matches the fault's
// recorded ground truth.
func TestLiveDrill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startStack(t, fault.Config{AfterEffect: kernel.ToolRunCommand})
	starter, ts := st.Kernel.Starter, "http://"+st.APIAddr
	s := struct{ Pool *pgxpool.Pool }{st.Pool}
	conn := st.Kernel.Conn

	// The whole API is served: the document matches it both ways.
	rep, err := checkOpenAPI(httpapi.OpenAPI, st.API.Routes())
	if err != nil || len(rep.Undocumented)+len(rep.Unserved) > 0 {
		t.Fatalf("OpenAPI vs the full API: %+v %v", rep, err)
	}

	const project, run = "acme", "drill"
	plan := `{"project":"acme","run_id":"drill","plan":{"steps":[
		{"tool":"run_command","args":{"command":"echo ok > drill-proof.txt","timeout_s":30}},
		{"tool":"run_command","args":{"command":"echo never > second.txt","timeout_s":30}}]}}`
	if r := call(t, "POST", ts+"/v1/runs", operatorTok, plan); r.status != 201 {
		t.Fatalf("start run: %d %s", r.status, r.raw)
	}
	if err := conn.Client.GetWorkflow(ctx, kernel.WorkflowID(project, run), "").Get(ctx, nil); err == nil {
		t.Fatal("the drill run completed; want it stopped by the uncertain failure")
	}
	if err := outbox.WaitDelivered(ctx, s.Pool, project, run, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	list := func() []operations.Item {
		r := call(t, "GET", ts+httpapi.PathOperations+"?project="+project, readerTok, "")
		var p struct {
			Operations []operations.Item `json:"operations"`
			Degraded   bool              `json:"degraded"`
		}
		if r.status != 200 || json.Unmarshal(r.raw, &p) != nil || p.Degraded {
			t.Fatalf("listing: %d %s", r.status, r.raw)
		}
		return p.Operations
	}
	items := list()
	if len(items) != 1 || items[0].OperationID != "op-1" || items[0].State != operations.StateFailedUncertain ||
		items[0].Tool != "run_command" || items[0].Failure == nil || items[0].Failure.Effect != kernel.EffectUncertain {
		t.Fatalf("listing after the drill: %+v", items)
	}

	// The operator inspects the workspace: the effect is there.
	ws, err := starter.Workspace(project, run)
	if err != nil {
		t.Fatal(err)
	}
	proofPath := filepath.Join(ws, "drill-proof.txt")
	proof, err := os.ReadFile(proofPath)
	if err != nil || string(proof) != "ok\n" {
		t.Fatalf("workspace file: %q %v", proof, err)
	}
	sum := sha256.Sum256(proof)
	body, _ := json.Marshal(map[string]any{
		"project": project, "run_id": run, "operation_id": "op-1", "effect": "occurred",
		"note":     "drill-proof.txt is in the run's workspace with the command's output: the effect landed before the crash",
		"evidence": map[string]any{"workspace_file": proofPath, "sha256": hex.EncodeToString(sum[:])},
	})
	r := call(t, "POST", ts+httpapi.PathReconcile, operatorTok, string(body))
	if r.status != 201 {
		t.Fatalf("reconcile: %d %s", r.status, r.raw)
	}
	if err := outbox.WaitDelivered(ctx, s.Pool, project, run, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if items := list(); len(items) != 0 {
		t.Fatalf("listing after the verdict: %+v", items)
	}

	hist := history(t, ts, project, run, "op-1")
	var chain []string
	for _, ev := range hist {
		chain = append(chain, ev.Type+"@"+ev.SourceID+"/"+ev.Actor)
	}
	if strings.Join(chain, " ") != "tool.started@kernel/kernel tool.failed@kernel/kernel operation.reconciled@kernel/operator:ann" {
		t.Fatalf("history: %v", chain)
	}
	var d kernel.Reconciliation
	if err := hist[2].DecodeData(&d); err != nil || d.Basis != kernel.BasisOperator || !strings.Contains(string(d.Evidence), "drill-proof.txt") ||
		*hist[2].ParentEventID != hist[0].Key() {
		t.Fatalf("verdict in history: %+v %v", d, err)
	}

	// The ground truth the drill recorded agrees with the verdict.
	recs, err := fault.Records(ctx, s.Pool, project, run)
	if err != nil || len(recs) != 1 || recs[0].OperationID != "op-1" || recs[0].Truth != d.Effect {
		t.Fatalf("ground truth %+v %v, verdict %s", recs, err, d.Effect)
	}
}

// TestRunsAPI starts runs through POST /v1/runs and reads them back.
func TestRunsAPI(t *testing.T) {
	t.Parallel()
	st := startStack(t, fault.Config{})
	project := "acme"
	base := "http://" + st.APIAddr
	api := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		r := call(t, method, base+path, token, body)
		return r.status, r.body
	}
	plan := `{"steps": [{"tool": "run_command", "args": {"command": "echo ok > proof.txt", "timeout_s": 30},
	          "postcondition": {"path": "proof.txt"}}]}`
	body := `{"project": "` + project + `", "run_id": "api-1", "plan": ` + plan + `}`

	if code, m := api("POST", "/v1/runs", readerTok, body); code != http.StatusForbidden {
		t.Fatalf("reader may start runs: %d %v", code, m)
	}
	code, m := api("POST", "/v1/runs", operatorTok, body)
	if code != http.StatusCreated || m["run_id"] != "api-1" {
		t.Fatalf("start: %d %v", code, m)
	}
	// Same plan, different key order and whitespace: the existing run.
	same := `{"project": "` + project + `", "run_id": "api-1", "plan": {"steps": [{"postcondition": {"path": "proof.txt"},
	          "args": {"timeout_s": 30, "command": "echo ok > proof.txt"}, "tool": "run_command"}]}}`
	if code, m := api("POST", "/v1/runs", operatorTok, same); code != http.StatusOK || m["run_id"] != "api-1" {
		t.Fatalf("idempotent start: %d %v", code, m)
	}
	diff := strings.Replace(body, "echo ok", "echo other", 1)
	if code, m := api("POST", "/v1/runs", operatorTok, diff); code != http.StatusConflict {
		t.Fatalf("different plan: %d %v", code, m)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.Kernel.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID(project, "api-1"), "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := outbox.WaitDelivered(ctx, st.Pool, project, "api-1", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	code, m = api("GET", "/v1/runs/api-1?project="+project, readerTok, "")
	if code != http.StatusOK || m["status"] != "completed" || m["run_id"] != "api-1" || m["project"] != project {
		t.Fatalf("get: %d %v", code, m)
	}
	evs, _ := m["events"].([]any)
	if len(evs) != 4 {
		t.Fatalf("get: %d events, want 4: %v", len(evs), m)
	}
	first := evs[0].(map[string]any)
	if first["type"] != "run.started" || first["source_id"] != "kernel" || first["event_id"] != project+"/api-1/run/started" {
		t.Fatalf("first event = %v", first)
	}

	// A generated run id when none is chosen.
	code, m = api("POST", "/v1/runs", operatorTok, `{"project": "`+project+`", "plan": `+plan+`}`)
	if id, _ := m["run_id"].(string); code != http.StatusCreated || !strings.HasPrefix(id, "run-") {
		t.Fatalf("generated id: %d %v", code, m)
	}

	for _, c := range []struct{ body, field string }{
		{`{"project": "x", "plan": {"steps": [{"tool": "nope"}]}}`, "plan.steps[0].tool"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"timeout_s": 3}}]}}`, "plan.steps[0].args.command"},
		{`{"project": "x", "plan": {"steps": []}}`, "plan.steps"},
		{`{"project": "x"}`, "plan"},
		{`{"plan": ` + plan + `}`, "project"},
		{`{"project": "x", "run_id": "../etc", "plan": ` + plan + `}`, "run_id"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "on_uncertian": "reissue"}]}}`, "on_uncertian"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "on_uncertain": "retry"}]}}`, "plan.steps[0].on_uncertain"},
		{`{"project": "x", "plan": {"steps": [{"tool": "delegate", "plan": {"steps": [{"tool": "run_command", "args": {}}]}}]}}`, "plan.steps[0].plan.steps[0].args.command"},
		{`{"project": "x", "plan": {"steps": [{"tool": "delegate"}]}}`, "plan.steps[0].plan"},
		// A client cannot take the id of a child run a delegation would start.
		{`{"project": "x", "run_id": "parent1.op-1", "plan": ` + plan + `}`, "run_id: must not contain \".\", which the kernel reserves for child runs"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": {"path": "/root/.bashrc"}}]}}`, "plan.steps[0].postcondition.path: must be relative"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": {"path": "../run-2/proof.txt"}}]}}`, "plan.steps[0].postcondition.path: must name a file inside the workspace"},
		{`{"project": "x", "plan": {"steps": [{"tool": "delegate", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": {"path": "a/../../b"}}]}}]}}`, "plan.steps[0].plan.steps[0].postcondition.path"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": {"path": "p.txt", "sha256": "abc"}}]}}`, "plan.steps[0].postcondition.sha256"},
		{`{"project": "x", "plan": {"steps": [{"tool": "run_command", "args": {"command": "true"}, "postcondition": "p.txt"}]}}`, "plan.steps[0].postcondition: must be a JSON object"},
	} {
		code, m := api("POST", "/v1/runs", operatorTok, c.body)
		msg, _ := m["error"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, c.field) {
			t.Errorf("%s: %d %q, want 400 naming %s", c.body, code, msg, c.field)
		}
	}
	// A misspelt field is a 400, not a second run under a generated id.
	if code, m := api("POST", "/v1/runs", operatorTok, `{"project": "x", "runId": "r9", "plan": `+plan+`}`); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["error"]), `unknown field "runId"`) {
		t.Errorf("misspelt runId: %d %v", code, m)
	}
	// A plan over MaxPlanBytes is a 413 before anything is written: the
	// run id stays free.
	big := `{"project": "` + project + `", "run_id": "big-1", "plan": {"steps": [{"tool": "run_command", "args": {"command": "echo ` +
		strings.Repeat("x", runner.MaxPlanBytes) + `"}}]}}`
	if code, m := api("POST", "/v1/runs", operatorTok, big); code != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(m["error"]), "at most") {
		t.Errorf("big plan: %d %v", code, m)
	}
	if code, m := api("POST", "/v1/runs", operatorTok, strings.Replace(body, "api-1", "big-1", 1)); code != http.StatusCreated {
		t.Errorf("run id after a refused big plan: %d %v", code, m)
	}
	if code, _ := api("GET", "/v1/runs/api-1", readerTok, ""); code != http.StatusBadRequest {
		t.Fatalf("GET without project: %d", code)
	}
	if code, _ := api("GET", "/v1/runs/nope?project="+project, readerTok, ""); code != http.StatusNotFound {
		t.Fatalf("GET unknown run: %d", code)
	}
}

// startStack starts the dev stack (apptest.Start) with the test's tokens
// and fault injection.
func startStack(t *testing.T, fc fault.Config, vars ...string) *app.Stack {
	t.Helper()
	return apptest.Start(t, "rita:reader:"+readerTok+",ann:operator:"+operatorTok+",bot:agent:"+agentTok, fc, vars...)
}

// TestRunEventsPaginate: GET /v1/runs/{run_id} answers a page of events
// (limit, next_cursor), bounded by MaxEventPageBytes whatever the events
// hold: a run of 40 events of 1 MiB each (a 40 MiB answer before) comes in
// pages of at most 4 MiB plus one event, and walking the cursor yields
// every event once, in order.
func TestRunEventsPaginate(t *testing.T) {
	t.Parallel()
	st := startStack(t, fault.Config{})
	b := reckontest.Run{Project: "acme", RunID: "ext-big", Source: "bot"}
	evs := []kernel.Event{b.RunStarted(time.Now().Add(-time.Hour))}
	blob := strings.Repeat("z", 1<<20)
	for i := range 40 {
		evs = append(evs, b.Event(fmt.Sprintf("op-%d/started", i), kernel.TypeToolStarted, time.Now().Add(-time.Hour), map[string]any{
			"operation_id": fmt.Sprintf("op-%d", i), "tool": "run_command", "args": map[string]any{"command": blob}}))
	}
	if _, err := journal.New(st.Pool, nil).Ingest(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	base := "http://" + st.APIAddr + "/v1/runs/ext-big?project=acme"
	seen, pages, largest := 0, 0, 0
	cursor := ""
	for {
		u := base
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		r := call(t, http.MethodGet, u, readerTok, "")
		if r.status != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, r.status, r.raw)
		}
		pages++
		largest = max(largest, len(r.raw))
		page, _ := r.body["events"].([]any)
		for _, e := range page {
			if id := e.(map[string]any)["event_id"]; id != evs[seen].EventID {
				t.Fatalf("event %d is %v, want %s", seen, id, evs[seen].EventID)
			}
			seen++
		}
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if seen != len(evs) || largest > runner.MaxEventPageBytes+(2<<20) {
		t.Fatalf("%d events of %d in %d pages, largest %d bytes", seen, len(evs), pages, largest)
	}
	t.Logf("run of %d events (~%d MiB): %d pages, largest answer %d bytes", len(evs), len(evs)-1, pages, largest)
	r := call(t, http.MethodGet, base+"&limit=2", readerTok, "")
	if got, _ := r.body["events"].([]any); r.status != http.StatusOK || len(got) != 2 || r.body["next_cursor"] == nil {
		t.Fatalf("limit=2: %d, %d events", r.status, len(got))
	}
	for _, q := range []string{"&limit=0", "&limit=1001", "&cursor=bogus"} {
		if r := call(t, http.MethodGet, base+q, readerTok, ""); r.status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", q, r.status, r.raw)
		}
	}
}

// racingClient forces the interleaving of two identical starts in which
// the first one's workflow start fails and, before it takes back its run
// row, the second one starts the workflow: the first's Describe answers
// "not found" as of its failure, but only once the second start had its
// chance (or after two seconds, when the second cannot go ahead).
type racingClient struct {
	client.Client
	calls    atomic.Int32
	aFailed  chan struct{}
	bStarted chan struct{}
}

func (c *racingClient) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	if c.calls.Add(1) == 1 {
		close(c.aFailed)
		return nil, serviceerror.NewUnavailable("temporal briefly unavailable (test)")
	}
	run, err := c.Client.ExecuteWorkflow(ctx, o, wf, args...)
	if err == nil {
		close(c.bStarted)
	}
	return run, err
}

func (c *racingClient) DescribeWorkflowExecution(ctx context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	select {
	case <-c.bStarted:
	case <-time.After(2 * time.Second):
	}
	return nil, serviceerror.NewNotFound("no such workflow (as of the failed start)")
}

// TestConcurrentStartsKeepTheRunRow: of two identical POST /v1/runs racing,
// the one whose start failed must not take back the run row after the
// other started the workflow; starts of one run id take turns, so the run
// that runs has its row.
func TestConcurrentStartsKeepTheRunRow(t *testing.T) {
	t.Parallel()
	st := startStack(t, fault.Config{})
	ctx := context.Background()
	rc := &racingClient{Client: st.Kernel.Starter.Client, aFailed: make(chan struct{}), bStarted: make(chan struct{})}
	racing := *st.Kernel.Starter
	racing.Client = rc
	plan := runner.Plan{Steps: []runner.Step{{Tool: "run_command", Args: json.RawMessage(`{"command":"true"}`)}}}
	req := runner.StartParams{Project: "acme", RunID: "race-1", Plan: plan}
	aErr := make(chan error, 1)
	go func() {
		_, _, err := racing.Start(ctx, req)
		aErr <- err
	}()
	<-rc.aFailed
	_, created, err := racing.Start(ctx, req)
	if err != nil || !created {
		t.Fatalf("the second start: created=%v err=%v", created, err)
	}
	if err := <-aErr; err == nil {
		t.Fatal("the start whose workflow start failed reported success")
	}
	var n int
	if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM kernel_runs WHERE project = 'acme' AND run_id = 'race-1'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the started run has %d kernel_runs rows (%v), want 1", n, err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := st.Kernel.Starter.Client.GetWorkflow(wctx, kernel.WorkflowID("acme", "race-1"), "").Get(wctx, nil); err != nil {
		t.Fatalf("the run: %v", err)
	}
}
