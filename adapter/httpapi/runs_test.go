package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// TestRunsListAPI: GET /v1/runs pages a project's runs newest first, by
// cursor, filtered by status and by parent; GET
// /v1/runs/{run_id}/operations gives a run's operations in every state;
// bad parameters are 400s naming them, an agent token a 403, and a token
// limited to projects sees only its own.
func TestRunsListAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	for i := range 5 {
		uncertainOp(e, "acme", fmt.Sprintf("run-%d", i), "agent-x")
	}
	done := reckontest.Run{Project: "acme", RunID: "done-1", Source: "bot"}
	body := `{"events":[` + string(mustJSON(t, done.RunStarted(ago(time.Hour)))) + `,` +
		string(mustJSON(t, done.Started("op-1", "http_post", ago(time.Hour)))) + `,` +
		string(mustJSON(t, done.Completed("op-1", ago(time.Hour)))) + `,` +
		string(mustJSON(t, done.RunCompleted(ago(time.Hour)))) + `]}`
	if r := call(t, "POST", ts.URL+httpapi.PathEvents, agentTok, body); r.status != 200 {
		t.Fatalf("agent's run: %d %s", r.status, r.raw)
	}
	k := reckontest.Run{Project: "acme", RunID: "k-1", Source: kernel.SourceKernel}
	child := reckontest.Run{Project: "acme", RunID: "k-1.op-1", Source: kernel.SourceKernel}
	e.Ingest(k.RunStarted(ago(time.Minute)), k.Started("op-1", kernel.DelegateTool, ago(time.Minute)),
		child.Event("run/started", kernel.TypeRunStarted, ago(time.Minute), kernel.RunStarted{ParentRunID: "k-1"}))
	uncertainOp(e, "zeta", "z-1", "agent-x")

	runs := func(token, query string) reply {
		t.Helper()
		return call(t, "GET", ts.URL+httpapi.PathRuns+"?"+query, token, "")
	}
	ids := func(r reply) string {
		var out []string
		for _, x := range r.body["runs"].([]any) {
			out = append(out, x.(map[string]any)["run_id"].(string))
		}
		return strings.Join(out, ",")
	}
	r := runs(readerTok, "project=acme")
	if r.status != 200 || ids(r) != "k-1.op-1,k-1,done-1,run-4,run-3,run-2,run-1,run-0" || r.body["next_cursor"] != nil {
		t.Fatalf("runs of acme: %d %s", r.status, r.raw)
	}
	first := r.body["runs"].([]any)[2].(map[string]any)
	ops, _ := first["operations"].(map[string]any)
	if first["run_id"] != "done-1" || first["kind"] != "agent" || first["source_id"] != "bot" || first["status"] != "completed" ||
		first["ended_at"] == nil || first["parent_run_id"] != nil || fmt.Sprint(ops) != "map[settled:1 total:1 unresolved:0]" {
		t.Errorf("done-1: %v", first)
	}
	if c := r.body["runs"].([]any)[0].(map[string]any); c["parent_run_id"] != "k-1" || c["kind"] != "kernel" {
		t.Errorf("child run: %v", c)
	}

	var walked []string
	cursor := ""
	for {
		q := "project=acme&limit=3"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := runs(readerTok, q)
		if r.status != 200 || len(r.body["runs"].([]any)) > 3 {
			t.Fatalf("page: %d %s", r.status, r.raw)
		}
		walked = append(walked, ids(r))
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if got := strings.Join(walked, "|"); got != "k-1.op-1,k-1,done-1|run-4,run-3,run-2|run-1,run-0" {
		t.Errorf("pages of 3: %s", got)
	}
	if r := runs(readerTok, "project=acme&status=completed"); r.status != 200 || ids(r) != "done-1" {
		t.Errorf("status=completed: %d %s", r.status, r.raw)
	}
	if r := runs(readerTok, "project=acme&status=failed&limit=2"); r.status != 200 || ids(r) != "run-4,run-3" || r.body["next_cursor"] == nil {
		t.Errorf("status=failed&limit=2: %d %s", r.status, r.raw)
	}
	if r := runs(readerTok, "project=acme&parent_run_id=k-1"); r.status != 200 || ids(r) != "k-1.op-1" {
		t.Errorf("parent_run_id=k-1: %d %s", r.status, r.raw)
	}

	for q, field := range map[string]string{
		"":                           "project",
		"project=acme&status=done":   "status",
		"project=acme&limit=0":       "limit",
		"project=acme&limit=201":     "limit",
		"project=acme&cursor=bogus":  "cursor",
		"project=acme&state=running": `\"state\" for GET /v1/runs;`,
	} {
		if r := runs(readerTok, q); r.status != 400 || !strings.Contains(string(r.raw), field) {
			t.Errorf("?%s: %d %s, want a 400 naming %s", q, r.status, r.raw, field)
		}
	}
	if r := runs("", "project=acme"); r.status != 401 {
		t.Errorf("no token: %d", r.status)
	}
	if r := runs(agentTok, "project=acme"); r.status != 403 {
		t.Errorf("agent token: %d", r.status)
	}
	if r := runs(acmeOperatorTok, "project=zeta"); r.status != 403 || !strings.Contains(string(r.raw), `not \"zeta\"`) {
		t.Errorf("limited token, another project: %d %s", r.status, r.raw)
	}
	if r := runs(acmeOperatorTok, "project=acme&limit=1"); r.status != 200 || ids(r) != "k-1.op-1" {
		t.Errorf("limited token, its project: %d %s", r.status, r.raw)
	}

	opsOf := func(token, run, query string) reply {
		t.Helper()
		return call(t, "GET", ts.URL+"/v1/runs/"+url.PathEscape(run)+"/operations?"+query, token, "")
	}
	r = opsOf(readerTok, "run-0", "project=acme")
	if items, _ := r.body["operations"].([]any); r.status != 200 || len(items) != 1 || items[0].(map[string]any)["state"] != "failed_uncertain" {
		t.Fatalf("operations of run-0: %d %s", r.status, r.raw)
	}
	r = opsOf(readerTok, "done-1", "project=acme")
	if items, _ := r.body["operations"].([]any); r.status != 200 || len(items) != 1 || items[0].(map[string]any)["state"] != "settled" ||
		items[0].(map[string]any)["effect"] != "occurred" || items[0].(map[string]any)["settled_by"] == nil {
		t.Fatalf("operations of done-1: %d %s", r.status, r.raw)
	}
	for q, want := range map[string]int{"": 400, "project=acme&limit=1001": 400, "project=acme&cursor=x": 400, "project=acme&status=x": 400} {
		if r := opsOf(readerTok, "run-0", q); r.status != want {
			t.Errorf("operations?%s: %d %s, want %d", q, r.status, r.raw, want)
		}
	}
	if r := opsOf(acmeOperatorTok, "z-1", "project=zeta"); r.status != 403 {
		t.Errorf("limited token, operations of another project's run: %d %s", r.status, r.raw)
	}
}

// TestRunsAPIOfKernelRuns: a kernel run that delegates, started through
// the API and run by the real workflow: GET /v1/runs lists it and its
// child run, linked both ways; GET /v1/runs/{run_id} carries the run's
// summary; its operations say how each was settled.
func TestRunsAPIOfKernelRuns(t *testing.T) {
	t.Parallel()
	st := startStack(t, fault.Config{})
	base := "http://" + st.APIAddr
	plan := `{"steps": [{"tool": "delegate", "plan": {"steps": [{"tool": "run_command", "args": {"command": "echo ok > proof.txt", "timeout_s": 30}}]}}]}`
	if r := call(t, "POST", base+httpapi.PathRuns, operatorTok, `{"project": "acme", "run_id": "parent-1", "plan": `+plan+`}`); r.status != 201 {
		t.Fatalf("start: %d %s", r.status, r.raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := st.Kernel.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID("acme", "parent-1"), "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"parent-1", "parent-1.op-1"} {
		if err := outbox.WaitDelivered(ctx, st.Pool, "acme", run, 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	r := call(t, "GET", base+httpapi.PathRuns+"?project=acme", readerTok, "")
	list, _ := r.body["runs"].([]any)
	if r.status != 200 || len(list) != 2 {
		t.Fatalf("runs: %d %s", r.status, r.raw)
	}
	child, parent := list[0].(map[string]any), list[1].(map[string]any)
	if child["run_id"] != "parent-1.op-1" || child["parent_run_id"] != "parent-1" || child["kind"] != "kernel" || child["status"] != "completed" ||
		parent["run_id"] != "parent-1" || parent["child_runs"] != float64(1) || parent["status"] != "completed" {
		t.Fatalf("runs: %s", r.raw)
	}
	r = call(t, "GET", base+"/v1/runs/parent-1?project=acme", readerTok, "")
	sum, _ := r.body["summary"].(map[string]any)
	if r.status != 200 || r.body["status"] != "completed" || sum == nil || sum["child_runs"] != float64(1) || sum["kind"] != "kernel" ||
		fmt.Sprint(sum["operations"]) != "map[settled:1 total:1 unresolved:0]" {
		t.Fatalf("get parent-1: %d %s", r.status, r.raw)
	}
	r = call(t, "GET", base+"/v1/runs/parent-1.op-1/operations?project=acme", readerTok, "")
	items, _ := r.body["operations"].([]any)
	if r.status != 200 || len(items) != 1 {
		t.Fatalf("operations of the child: %d %s", r.status, r.raw)
	}
	if op := items[0].(map[string]any); op["state"] != "settled" || op["effect"] != "occurred" || op["tool"] != "run_command" ||
		op["settled_by"].(map[string]any)["type"] != "tool.completed" {
		t.Fatalf("the child's operation: %v", op)
	}
}
