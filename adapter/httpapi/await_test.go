package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

// appendPlan is a plan whose first step appends "op-1" to effects.txt
// (declaring what the file then holds when postcondition is set) and
// waits when it fails uncertain; the second step appends "op-2".
func appendPlan(project, runID string, postcondition bool) string {
	first := map[string]any{"tool": "run_command", "on_uncertain": "await",
		"args": map[string]any{"command": `echo "$RECKON_OPERATION_ID" >> effects.txt`, "timeout_s": 30}}
	if postcondition {
		sum := sha256.Sum256([]byte("op-1\n"))
		first["postcondition"] = map[string]any{"path": "effects.txt", "sha256": hex.EncodeToString(sum[:])}
	}
	second := map[string]any{"tool": "run_command", "args": map[string]any{"command": `echo "$RECKON_OPERATION_ID" >> effects.txt`, "timeout_s": 30}}
	b, _ := json.Marshal(map[string]any{"project": project, "run_id": runID, "plan": map[string]any{"steps": []any{first, second}}})
	return string(b)
}

// runView reads GET /v1/runs/{run_id}.
func runView(t *testing.T, base, project, runID string) runner.RunView {
	t.Helper()
	r := call(t, http.MethodGet, base+"/v1/runs/"+runID+"?project="+project+"&limit=1000", readerTok, "")
	var v runner.RunView
	if r.status != http.StatusOK || json.Unmarshal(r.raw, &v) != nil {
		t.Fatalf("GET run %s: %d %s", runID, r.status, r.raw)
	}
	return v
}

// eventOf is the run's first event of type typ.
func eventOf(t *testing.T, v runner.RunView, typ string) kernel.Event {
	t.Helper()
	for _, ev := range v.Events {
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("run %s has no %s: %v", v.RunID, typ, v.Events)
	return kernel.Event{}
}

// The loop closed through the API, on the dev stack with its pipeline:
// a run whose command committed its effect and lost its worker waits
// (GET /v1/runs shows it awaiting), asks for a triage of itself, the
// postcondition probe proves the effect, and the run resumes without
// running the command again. A run whose effect no probe can see (no
// postcondition, and every workspace manifest cut short, as for a
// workspace too big to walk in its budget) waits for the operator, whose
// ruling through the API resumes it.
func TestAwaitLoopThroughTheAPI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startStack(t, fault.Config{AfterEffect: kernel.ToolRunCommand}, "RECKON_MANIFEST_BUDGET", "1ns")
	if err := st.StartPipeline(st.Operations); err != nil {
		t.Fatal(err)
	}
	base := "http://" + st.APIAddr
	for _, run := range []string{"proved", "ruled"} {
		if r := call(t, http.MethodPost, base+"/v1/runs", operatorTok, appendPlan("acme", run, run == "proved")); r.status != http.StatusCreated {
			t.Fatalf("start %s: %d %s", run, r.status, r.raw)
		}
	}

	// The probe-provable run resumes on its own.
	if err := st.Kernel.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID("acme", "proved"), "").Get(ctx, nil); err != nil {
		t.Fatalf("run proved: %v", err)
	}
	reckontest.Eventually(t, 30*time.Second, "run proved's events delivered", func() bool {
		return hasEvent(runView(t, base, "acme", "proved"), kernel.TypeRunCompleted)
	})
	v := runView(t, base, "acme", "proved")
	awaiting, resumed := eventOf(t, v, kernel.TypeRunAwaiting), eventOf(t, v, kernel.TypeRunResumed)
	var d kernel.RunResumed
	if err := resumed.DecodeData(&d); err != nil || d.Effect != kernel.EffectOccurred || d.Basis != kernel.BasisProbe {
		t.Fatalf("run.resumed %s (%v): want occurred by probe", resumed.Data, err)
	}
	t.Logf("probe-provable run: awaiting at %s, resumed at %s: %s", awaiting.TS.Format(time.RFC3339Nano), resumed.TS.Format(time.RFC3339Nano), resumed.TS.Sub(awaiting.TS))
	if got := readWorkspace(t, st.Kernel.Starter, "acme", "proved"); got != "op-1\nop-2\n" {
		t.Fatalf("effects.txt of run proved = %q: want op-1 once and op-2", got)
	}

	// The other waits, with its triage's unknown in the operator's queue.
	var w runner.RunView
	reckontest.Eventually(t, 30*time.Second, "run ruled awaiting op-1 with a verdict", func() bool {
		w = runView(t, base, "acme", "ruled")
		return w.Status == runner.StatusAwaiting && hasEvent(w, kernel.TypeSupervisorVerdict)
	})
	if w.Awaiting == nil || w.Awaiting.OperationID != "op-1" || w.Awaiting.Since.IsZero() {
		t.Fatalf("awaiting = %+v", w.Awaiting)
	}
	// The runs list says so too, from the same journal facts: the waiting
	// run, and not the one that resumed.
	if r := call(t, http.MethodGet, base+httpapi.PathRuns+"?project=acme&status=awaiting", readerTok, ""); r.status != http.StatusOK ||
		!strings.Contains(string(r.raw), `"run_id":"ruled"`) || strings.Contains(string(r.raw), `"run_id":"proved"`) {
		t.Fatalf("awaiting runs: %d %s", r.status, r.raw)
	}
	if r := call(t, http.MethodPost, base+httpapi.PathReconcile, operatorTok,
		`{"project":"acme","run_id":"ruled","operation_id":"op-1","effect":"occurred","note":"effects.txt holds op-1"}`); r.status != http.StatusCreated {
		t.Fatalf("reconcile: %d %s", r.status, r.raw)
	}
	if err := st.Kernel.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID("acme", "ruled"), "").Get(ctx, nil); err != nil {
		t.Fatalf("run ruled: %v", err)
	}
	reckontest.Eventually(t, 30*time.Second, "run ruled's run.resumed delivered", func() bool {
		return hasEvent(runView(t, base, "acme", "ruled"), kernel.TypeRunResumed)
	})
	if err := eventOf(t, runView(t, base, "acme", "ruled"), kernel.TypeRunResumed).DecodeData(&d); err != nil || d.Basis != kernel.BasisOperator {
		t.Fatalf("run ruled resumed on %+v (%v), want the operator's ruling", d, err)
	}
	if got := readWorkspace(t, st.Kernel.Starter, "acme", "ruled"); got != "op-1\nop-2\n" {
		t.Fatalf("effects.txt of run ruled = %q", got)
	}
	reckontest.Eventually(t, 30*time.Second, "both runs listed completed", func() bool {
		r := call(t, http.MethodGet, base+httpapi.PathRuns+"?project=acme&status=completed", readerTok, "")
		return strings.Contains(string(r.raw), `"run_id":"ruled"`) && strings.Contains(string(r.raw), `"run_id":"proved"`)
	})
}

// A waiting run starts nothing until its wait ends, so the workspace-diff
// probe may judge it as it judges an ended run: here the command faulted
// before it ran, the workspace is as the manifest before it recorded, the
// probe proves none, and the run issues the step again (once, naming the
// first) and completes.
func TestAwaitNoneOnTheManifestProbeReissues(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startStack(t, fault.Config{BeforeEffect: kernel.ToolRunCommand})
	if err := st.StartPipeline(st.Operations); err != nil {
		t.Fatal(err)
	}
	base := "http://" + st.APIAddr
	if r := call(t, http.MethodPost, base+"/v1/runs", operatorTok, appendPlan("acme", "untouched", false)); r.status != http.StatusCreated {
		t.Fatalf("start: %d %s", r.status, r.raw)
	}
	if err := st.Kernel.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID("acme", "untouched"), "").Get(ctx, nil); err != nil {
		t.Fatalf("run untouched: %v", err)
	}
	var v runner.RunView
	reckontest.Eventually(t, 30*time.Second, "the run's events delivered", func() bool {
		v = runView(t, base, "acme", "untouched")
		return hasEvent(v, kernel.TypeRunCompleted)
	})
	var d kernel.RunResumed
	if err := eventOf(t, v, kernel.TypeRunResumed).DecodeData(&d); err != nil || d.Effect != kernel.EffectNone || d.Basis != kernel.BasisProbe {
		t.Fatalf("run.resumed %+v (%v): want none by probe", d, err)
	}
	var reissue kernel.ToolStarted
	for _, ev := range v.Events {
		if ev.Type == kernel.TypeToolStarted && ev.OperationID() == "op-1-r1" {
			_ = ev.DecodeData(&reissue)
		}
	}
	if reissue.ReissueOf != "op-1" {
		t.Fatalf("no re-issue of op-1: %v", v.Events)
	}
	if got := readWorkspace(t, st.Kernel.Starter, "acme", "untouched"); got != "op-1-r1\nop-2\n" {
		t.Fatalf("effects.txt = %q: want the re-issue's line and op-2's, nothing of the faulted op-1", got)
	}
}

func hasEvent(v runner.RunView, typ string) bool {
	for _, ev := range v.Events {
		if ev.Type == typ {
			return true
		}
	}
	return false
}

// POST /v1/triage settles now what the sweep can, on the sweep's path, and
// answers what it did; only an operator may ask.
func TestTriageNow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startStack(t, fault.Config{AfterEffect: kernel.ToolRunCommand}, "RECKON_TOKENS",
		"rita:reader:"+readerTok+",ann:operator:"+operatorTok+",bot:agent:"+agentTok+",acme-ops:operator:"+acmeOperatorTok+"::beta")
	base := "http://" + st.APIAddr
	plan := strings.Replace(appendPlan("acme", "stopped", true), `"on_uncertain":"await",`, "", 1)
	if r := call(t, http.MethodPost, base+"/v1/runs", operatorTok, plan); r.status != http.StatusCreated {
		t.Fatalf("start: %d %s", r.status, r.raw)
	}
	if err := st.Kernel.Conn.Client.GetWorkflow(ctx, kernel.WorkflowID("acme", "stopped"), "").Get(ctx, nil); err == nil {
		t.Fatal("the run completed; want it stopped by the uncertain failure")
	}
	// The triage judges the run by its journaled events: its end must be
	// there, or the probe rightly waits for it (deferred).
	if err := outbox.WaitDelivered(ctx, st.Pool, "acme", "stopped", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	reckontest.Eventually(t, 30*time.Second, "run stopped listed", func() bool {
		r := call(t, http.MethodGet, base+httpapi.PathOperations+"?project=acme", readerTok, "")
		return strings.Contains(string(r.raw), `"op-1"`)
	})

	body := `{"project":"acme","run_id":"stopped"}`
	for _, c := range []struct {
		name, token, body string
		want              int
	}{
		{"no token", "", body, http.StatusUnauthorized},
		{"agent", agentTok, body, http.StatusForbidden},
		{"reader", readerTok, body, http.StatusForbidden},
		{"an operator of another project", acmeOperatorTok, body, http.StatusForbidden},
		{"every project, by an operator limited to some", acmeOperatorTok, `{}`, http.StatusForbidden},
		{"run without project", operatorTok, `{"run_id":"stopped"}`, http.StatusBadRequest},
		{"unknown field", operatorTok, `{"project":"acme","run":"stopped"}`, http.StatusBadRequest},
	} {
		if r := call(t, http.MethodPost, base+httpapi.PathTriage, c.token, c.body); r.status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.raw, c.want)
		}
	}
	r := call(t, http.MethodPost, base+httpapi.PathTriage, operatorTok, body)
	var ans httpapi.TriageAnswer
	if r.status != http.StatusOK || json.Unmarshal(r.raw, &ans) != nil {
		t.Fatalf("triage: %d %s", r.status, r.raw)
	}
	if len(ans.Walls) != 1 || ans.Walls[0].Outcome != "journaled" || ans.Walls[0].Verdict == nil ||
		len(ans.Settled) != 1 || ans.Settled[0].OperationID != "op-1" || ans.Settled[0].Effect != kernel.EffectOccurred || ans.Settled[0].Basis != kernel.BasisProbe {
		t.Fatalf("triage answer: %s", r.raw)
	}
	// Asked again, nothing is left: the run is settled, not triaged twice.
	reckontest.Eventually(t, 30*time.Second, "the reconciliation journaled", func() bool {
		r := call(t, http.MethodGet, base+httpapi.PathOperations+"?project=acme", readerTok, "")
		return !strings.Contains(string(r.raw), `"op-1"`)
	})
	r = call(t, http.MethodPost, base+httpapi.PathTriage, operatorTok, `{"project":"acme"}`)
	if r.status != http.StatusOK || json.Unmarshal(r.raw, &ans) != nil || len(ans.Walls) != 0 || len(ans.Settled) != 0 {
		t.Fatalf("second triage: %d %s", r.status, r.raw)
	}
}

func readWorkspace(t *testing.T, s *runner.Starter, project, runID string) string {
	t.Helper()
	ws, err := s.Workspace(project, runID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ws, "effects.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
