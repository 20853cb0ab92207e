package app

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
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/pipeline/triage"
)

// The hostile-caller suite: the whole dev stack (API, embedded Temporal,
// worker, bubblewrap sandbox, publisher, probes) attacked as the issue
// that asked for the trust boundary attacked it. Every forgery is refused
// or harmless, and where it is refused the journal is left unchanged.

const (
	botTok  = "bot-secret-1"  // agent "bot"
	bot2Tok = "bot2-secret-1" // agent "bot2"
	annTok  = "ann-secret-1"  // operator "ann"
)

type hostile struct {
	t    *testing.T
	st   *Stack
	base string
}

func startHostile(t *testing.T) *hostile {
	t.Helper()
	s := pgtest.New(t)
	cfg := testConfig(t, map[string]string{
		"DATABASE_URL": s.URL, "RECKON_DATA_DIR": sandboxtest.Dir(t), "RECKON_HTTP_ADDR": "127.0.0.1:0",
		"RECKON_TOKENS":    "bot:agent:" + botTok + ",bot2:agent:" + bot2Tok + ",ann:operator:" + annTok,
		"RECKON_LOG_LEVEL": "error",
	})
	st, err := StartDev(context.Background(), cfg, DevConfig{
		Kernel: KernelConfig{InMemory: true},
		Outbox: outbox.Config{PollInterval: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return &hostile{t: t, st: st, base: "http://" + st.APIAddr}
}

// call sends body (nil: none; a string as it is; anything else as JSON)
// to the API with token and returns the status and the JSON reply.
func (h *hostile) call(method, path, token string, body any) (int, map[string]any) {
	h.t.Helper()
	var s string
	switch b := body.(type) {
	case nil:
	case string:
		s = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		s = string(raw)
	}
	r := reckontest.Call(h.t, method, h.base+path, token, s)
	return r.Status, r.Body
}

func (h *hostile) count(q string, args ...any) int {
	h.t.Helper()
	return pgtest.Int(h.t, h.st.Pool, q, args...)
}

func (h *hostile) journalRows() int { return h.count("SELECT count(*) FROM journal_events") }

// refused posts one event and checks the 403 names events[0], the field
// and the rule, and that the journal did not change.
func (h *hostile) refused(what, token string, ev map[string]any, field, rule string) {
	h.t.Helper()
	before := h.journalRows()
	code, out := h.call("POST", "/v1/events", token, map[string]any{"events": []any{ev}})
	msg, _ := out["error"].(string)
	if code != http.StatusForbidden || !strings.Contains(msg, "events[0]") || !strings.Contains(msg, `field "`+field+`"`) || !strings.Contains(msg, rule) {
		h.t.Errorf("%s: %d %q, want 403 naming events[0], field %q and %q", what, code, msg, field, rule)
	}
	if after := h.journalRows(); after != before {
		h.t.Errorf("%s: journal rows %d → %d", what, before, after)
	}
	h.t.Logf("%s → %d %s", what, code, msg)
}

// startRun starts a plan through the API and waits for the run to end and
// its events to reach the journal.
func (h *hostile) startRun(project, runID string, plan any) {
	h.t.Helper()
	code, out := h.call("POST", "/v1/runs", annTok, map[string]any{"project": project, "run_id": runID, "plan": plan})
	if code != http.StatusCreated {
		h.t.Fatalf("start %s/%s: %d %v", project, runID, code, out)
	}
	h.waitRun(project, runID)
}

func (h *hostile) waitRun(project, runID string) string {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, out := h.call("GET", "/v1/runs/"+runID+"?project="+project, annTok, nil)
		if s, _ := out["status"].(string); s == "completed" || s == "failed" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := outbox.WaitDelivered(ctx, h.st.Pool, project, runID, 20*time.Millisecond); err != nil {
				h.t.Fatal(err)
			}
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %s/%s did not end: %v", project, runID, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func event(source, id, project, run, typ, actor string, data any) map[string]any {
	return map[string]any{"source_id": source, "event_id": id, "project": project, "run_id": run,
		"type": typ, "ts": time.Now().UTC().Format(time.RFC3339Nano), "actor": actor, "data": data}
}

func cmdStep(command string, extra ...any) map[string]any {
	s := map[string]any{"tool": "run_command", "args": map[string]any{"command": command, "timeout_s": 30}}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i].(string)] = extra[i+1]
	}
	return s
}

// TestHostileCallers attacks a stack as hostile callers would: forged
// settlements of a kernel run's uncertain operation, pre-claimed and
// squatted run ids, postconditions outside the workspace, an operation
// dated before the listing's window and a forged workspace. None is
// written, settles anything, or makes a probe read past a symlink.
func TestHostileCallers(t *testing.T) {
	t.Parallel()
	h := startHostile(t)

	// A real kernel run whose second command fails after running: op-2 is
	// uncertain, and stays so whatever callers forge.
	secretDir := sandboxtest.Dir(t)
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("the operator's private key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	secretSum := sha256.Sum256([]byte("the operator's private key\n"))
	h.startRun("acme", "run-42", map[string]any{"steps": []any{
		// What a hostile command can leave behind: symlinks out of its
		// workspace, to a file and to a directory.
		cmdStep(fmt.Sprintf("ln -s %s proof.txt && ln -s %s secrets", secret, secretDir)),
		cmdStep("echo ran >> effects.txt; exit 3", "postcondition", map[string]any{"path": "proof.txt"}),
	}})
	if got := strings.Join(h.unresolved(), " "); got != "run-42/op-2:failed_uncertain" {
		t.Fatalf("before the attacks: unresolved %q", got)
	}
	h.forgeSettlements()
	if got := strings.Join(h.unresolved(), " "); got != "run-42/op-2:failed_uncertain" {
		t.Fatalf("after the forgeries: unresolved %q, want op-2 still uncertain", got)
	}
	h.refuseRunStarts()
	h.refuseBeforeWindow()
	h.forgeWorkspace()
	h.checkProbes(hex.EncodeToString(secretSum[:]))
}

// unresolved lists project acme's unresolved operations as
// <run>/<operation>:<state>.
func (h *hostile) unresolved() []string {
	h.t.Helper()
	_, out := h.call("GET", "/v1/agent/operations?project=acme", annTok, nil)
	var ids []string
	items, _ := out["operations"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		ids = append(ids, fmt.Sprintf("%s/%s:%s", m["run_id"], m["operation_id"], m["state"]))
	}
	return ids
}

// forgeSettlements tries to settle run-42's op-2 as "rejected, safe to
// re-issue" every way a caller could forge it; each is refused.
func (h *hostile) forgeSettlements() {
	h.t.Helper()
	settle := map[string]any{"operation_id": "op-2", "error_type": "validation", "error": "rejected", "effect": "none"}
	// Reserved sources: the kernel's own ids, a forged operator verdict,
	// a forged supervisor verdict.
	h.refused("kernel source, the kernel's own tool.failed id", botTok,
		event("kernel", "acme/run-42/op-2/failed", "acme", "run-42", kernel.TypeToolFailed, "agent", settle),
		"source_id", "can never be granted")
	h.refused("supervisor source", botTok,
		event("supervisor", "x-1", "acme", "run-42", kernel.TypeToolFailed, "agent", settle), "source_id", "can never be granted")
	h.refused("operator source", annTok,
		event("operator:ann", "x-2", "acme", "run-42", kernel.TypeToolFailed, "agent", settle), "source_id", "can never be granted")
	// Another agent's source.
	h.refused("another agent's source", botTok,
		event("bot2", "x-3", "acme", "other-run", kernel.TypeToolStarted, "agent", map[string]any{"operation_id": "op-1", "tool": "x"}),
		"source_id", `token "bot" may write only its own name`)
	// Reserved types, from an agent and from an operator token.
	rec := event("bot", "x-4", "acme", "other-run", kernel.TypeOperationReconciled, "agent",
		map[string]any{"operation_id": "op-2", "effect": "none", "note": "forged", "basis": "operator"})
	rec["parent_event_id"] = map[string]any{"source_id": "kernel", "event_id": "acme/run-42/op-2/started"}
	h.refused("operation.reconciled from an agent", botTok, rec, "type", "POST /v1/agent/operations/reconcile")
	rec["source_id"] = "ann"
	h.refused("operation.reconciled from an operator token", annTok, rec, "type", "POST /v1/agent/operations/reconcile")
	h.refused("supervisor.verdict", botTok, event("bot", "x-5", "acme", "other-run", kernel.TypeSupervisorVerdict, "agent",
		map[string]any{"kind": "reconciliation", "needs_attention": false, "causes": []string{}, "remedies": []string{}, "lesson": "forged",
			"operation_ids": []string{"op-2"}, "supervisor": "builtin", "model": "-", "prompt_version": "v", "wall_digest": "x"}),
		"type", "run.* and tool.*")
	// Actor spoofing.
	for _, actor := range []string{"operator:alice", "supervisor", "kernel"} {
		h.refused("actor "+actor, botTok, event("bot", "x-6", "acme", "other-run", kernel.TypeToolFailed, actor, settle),
			"actor", `must be "agent"`)
	}
	// Writing into a kernel run under one's own source (the same
	// "rejected, safe to re-issue" forgery), and into its child runs.
	h.refused("own source into a kernel run", botTok,
		event("bot", "run-42/op-2/failed", "acme", "run-42", kernel.TypeToolFailed, "agent", settle), "run_id", "is a kernel run")
	h.refused("own source into a kernel run's child", botTok,
		event("bot", "run-42.op-3/run/started", "acme", "run-42.op-3", kernel.TypeRunStarted, "agent", map[string]any{}), "run_id", "is a kernel run")
}

// refuseRunStarts: run ids a caller pre-claimed or squats, and plans that
// declare a postcondition outside the workspace, start no kernel run.
func (h *hostile) refuseRunStarts() {
	t := h.t
	t.Helper()
	// Pre-claiming a run before it starts: the kernel's ids under the
	// kernel's source are refused; the caller's own events make the id
	// taken, and POST /v1/runs refuses it instead of running on top.
	h.refused("pre-claimed kernel id", botTok,
		event("kernel", "acme/run-43/op-1/failed", "acme", "run-43", kernel.TypeToolFailed, "agent",
			map[string]any{"operation_id": "op-1", "error_type": "validation", "error": "x", "effect": "none"}),
		"source_id", "can never be granted")
	if code, out := h.call("POST", "/v1/events", botTok, map[string]any{"events": []any{
		event("bot", "run-44/op-1/failed", "acme", "run-44", kernel.TypeToolFailed, "agent",
			map[string]any{"operation_id": "op-1", "error_type": "validation", "error": "x", "effect": "none"}),
	}}); code != http.StatusOK {
		t.Fatalf("an agent's own run: %d %v", code, out)
	}
	runsBefore := h.count("SELECT count(*) FROM kernel_runs")
	code, out := h.call("POST", "/v1/runs", annTok, map[string]any{"project": "acme", "run_id": "run-44",
		"plan": map[string]any{"steps": []any{cmdStep("true")}}})
	if msg, _ := out["error"].(string); code != http.StatusConflict || !strings.Contains(msg, `source "bot"`) {
		t.Fatalf("start over a pre-claimed run id: %d %v", code, out)
	}
	t.Logf("pre-claimed run id → %d %s", code, out["error"])
	// The run the kernel was refused for never gets a kernel event parked.
	h.startRun("acme", "run-43", map[string]any{"steps": []any{cmdStep("exit 3")}})
	if n := h.count("SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d outbox rows parked", n)
	}

	// Child-id squatting: a client cannot take <run>.<op>.
	code, out = h.call("POST", "/v1/runs", annTok, map[string]any{"project": "acme", "run_id": "run-45.op-1",
		"plan": map[string]any{"steps": []any{cmdStep("true")}}})
	if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "reserves for child runs") {
		t.Fatalf("child-id squatting: %d %v", code, out)
	}
	t.Logf("child-id squatting → %d %s", code, out["error"])
	// A postcondition outside the workspace.
	for _, p := range []string{"/root/.bashrc", "../run-42/effects.txt"} {
		code, out = h.call("POST", "/v1/runs", annTok, map[string]any{"project": "acme", "run_id": "run-46",
			"plan": map[string]any{"steps": []any{cmdStep("true", "postcondition", map[string]any{"path": p})}}})
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "postcondition.path") {
			t.Fatalf("postcondition %s: %d %v", p, code, out)
		}
		t.Logf("postcondition %s → %d %s", p, code, out["error"])
	}
	if n := h.count("SELECT count(*) FROM kernel_runs"); n != runsBefore+1 { // run-43 only
		t.Fatalf("kernel_runs %d, want %d", n, runsBefore+1)
	}
}

// refuseBeforeWindow: an operation dated before the listing's window
// (RECKON_OPERATIONS_WINDOW), which nobody would ever list, triage or
// show, is not stored.
func (h *hostile) refuseBeforeWindow() {
	t := h.t
	t.Helper()
	hidden := event("bot", "hidden-1/op-1/started", "acme", "hidden-1", kernel.TypeToolStarted, "agent",
		map[string]any{"operation_id": "op-1", "tool": "http_post", "args": map[string]any{}})
	hidden["ts"] = time.Now().Add(-h.st.Cfg.OperationsWindow - time.Hour).UTC().Format(time.RFC3339Nano)
	rowsBefore := h.journalRows()
	if code, out := h.call("POST", "/v1/events", botTok, map[string]any{"events": []any{hidden}}); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(out["error"]), "before the operations window") {
		t.Errorf("a tool.started dated before the window: %d %v, want 400 naming the window", code, out)
	}
	if n := h.journalRows(); n != rowsBefore {
		t.Errorf("a tool.started dated before the window: journal rows %d → %d", rowsBefore, n)
	}
}

// forgeWorkspace writes an agent's own run, forged-1, whose run.started
// names a directory through the kernel run's symlink, and whose
// run_command declares the secret as its postcondition.
func (h *hostile) forgeWorkspace() {
	h.t.Helper()
	ws := filepath.Join(h.st.Cfg.DataDir, "workspaces", "acme", "run-42")
	if code, out := h.call("POST", "/v1/events", botTok, map[string]any{"events": []any{
		event("bot", "forged-1/run/started", "acme", "forged-1", kernel.TypeRunStarted, "agent", map[string]any{"workspace": filepath.Join(ws, "secrets")}),
		event("bot", "forged-1/op-1/started", "acme", "forged-1", kernel.TypeToolStarted, "agent",
			map[string]any{"operation_id": "op-1", "tool": "run_command", "args": map[string]any{"command": "true"}, "postcondition": map[string]any{"path": "secret.txt"}}),
		event("bot", "forged-1/op-1/failed", "acme", "forged-1", kernel.TypeToolFailed, "agent",
			map[string]any{"operation_id": "op-1", "error_type": "x", "error": "x", "effect": "uncertain"}),
		event("bot", "forged-1/run/failed", "acme", "forged-1", kernel.TypeRunFailed, "agent", map[string]any{"error": "x"}),
	}}); code != http.StatusOK {
		h.t.Fatalf("forged run: %d %v", code, out)
	}
}

// checkProbes runs the triage sweep's probes on run-42 and forged-1: the
// forged workspace is never read, and the kernel run's symlinked
// postcondition is not followed (no provenance holds secretSum).
func (h *hostile) checkProbes(secretSum string) {
	t := h.t
	t.Helper()
	walls := h.walls()
	var seen []string
	for _, w := range walls {
		for _, op := range w.Operations {
			seen = append(seen, w.RunID+"/"+op.OperationID)
			for _, ev := range op.Evidence {
				// The only effect a probe may find is the kernel run's own
				// command writing effects.txt (the workspace diff); nothing
				// may read through the symlinks to the secret.
				ownEffect := ev.Probe == probe.DiffName && w.RunID == "run-42" && strings.HasSuffix(ev.Detail, ": effects.txt")
				if strings.Contains(string(ev.Provenance), secretSum) || ev.Finding == pipeline.FindingOccurred && !ownEffect {
					t.Errorf("%s/%s: probe %s read the secret: %s %s", w.RunID, op.OperationID, ev.Probe, ev.Detail, ev.Provenance)
				}
				t.Logf("probe on %s/%s: %s %s: %s", w.RunID, op.OperationID, ev.Probe, ev.Finding, ev.Detail)
			}
			if w.RunID == "run-42" && (len(op.Evidence) != 2 || !strings.Contains(op.Evidence[0].Detail, "symlink") || op.Evidence[1].Probe != probe.DiffName) {
				t.Errorf("run-42/%s: evidence %+v, want the workspace probe refusing the symlink", op.OperationID, op.Evidence)
			}
			if w.RunID == "forged-1" && len(op.Evidence) != 0 {
				t.Errorf("forged-1/%s: the workspace probe applied to an agent's run_command: %+v", op.OperationID, op.Evidence)
			}
		}
	}
	if !strings.Contains(strings.Join(seen, " "), "run-42/op-2") || !strings.Contains(strings.Join(seen, " "), "forged-1/op-1") {
		t.Fatalf("walls built for %v", seen)
	}
}

// walls builds every wall of project acme as the sweep would, with the
// stack's own probes, without writing anything.
func (h *hostile) walls() []pipeline.Wall {
	h.t.Helper()
	c := &supervisor.Recorder{}
	sw, err := h.st.NewSweeper(h.st.Operations, func(sc *triage.Config) { sc.Supervisor = c })
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := sw.Sweep(context.Background(), triage.SweepParams{Project: "acme", DryRun: true}); err != nil {
		h.t.Fatal(err)
	}
	return c.Walls()
}

// The same run id in two projects: both accepted, both run to completion.
func TestSameRunIDAcrossProjects(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	for _, p := range []string{"pa", "pb"} {
		code, out := h.call("POST", "/v1/runs", annTok, map[string]any{"project": p, "run_id": "shared-1",
			"plan": map[string]any{"steps": []any{cmdStep("echo " + p + " > who.txt")}}})
		if code != http.StatusCreated {
			t.Fatalf("start %s/shared-1: %d %v", p, code, out)
		}
	}
	for _, p := range []string{"pa", "pb"} {
		if s := h.waitRun(p, "shared-1"); s != "completed" {
			t.Fatalf("%s/shared-1 ended %s", p, s)
		}
		b, err := os.ReadFile(filepath.Join(h.st.Cfg.DataDir, "workspaces", p, "shared-1", "who.txt"))
		if err != nil || string(b) != p+"\n" {
			t.Fatalf("%s/shared-1 workspace: %q %v", p, b, err)
		}
	}
	if n := h.count("SELECT count(*) FROM kernel_event_outbox WHERE parked_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d outbox rows parked", n)
	}
}

// A command that goes for the database through its Unix socket (or TCP)
// cannot reach it, and writes nothing into the journal.
func TestSandboxedCommandCannotReachTheDatabase(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	var schema string
	if err := h.st.Pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	insert := fmt.Sprintf(`INSERT INTO %s.journal_events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest) VALUES ('kernel', 'forged', 'acme', 'run-1', 'operation.reconciled', now(), 'operator:root', '{}', '\x00')`, schema)
	attempts := []string{
		`python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/var/run/postgresql/.s.PGSQL.5432")'`,
		`python3 -c 'import socket; socket.create_connection(("127.0.0.1", 5432), timeout=5)'`,
	}
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/psql"); err == nil {
		attempts = append(attempts, fmt.Sprintf(`/usr/lib/postgresql/15/bin/psql "host=/var/run/postgresql user=postgres dbname=reckon_test" -c %q`, insert))
	}
	before := h.journalRows()
	for i, a := range attempts {
		run := fmt.Sprintf("db-%d", i)
		h.startRun("acme", run, map[string]any{"steps": []any{cmdStep(a)}})
		evs, err := h.st.Journal.RunEvents(context.Background(), "acme", run)
		if err != nil {
			t.Fatal(err)
		}
		var failed kernel.ToolFailed
		for _, e := range evs {
			if e.Type == kernel.TypeToolFailed {
				_ = e.DecodeData(&failed)
			}
		}
		if failed.ErrorType != "command_failed" || failed.Effect != kernel.EffectUncertain {
			t.Fatalf("%s: the command did not run and fail: %+v", a, failed)
		}
		lines := strings.Split(strings.TrimSpace(failed.Error), "\n")
		t.Logf("%s → %s … %s", a, lines[0], lines[len(lines)-1])
	}
	if n := h.count("SELECT count(*) FROM journal_events WHERE event_id = 'forged'"); n != 0 {
		t.Fatal("the sandboxed command wrote into the journal")
	}
	// Each run adds only its own kernel events (run.started, tool.started,
	// tool.failed, run.failed).
	if after := h.journalRows(); after != before+4*len(attempts) {
		t.Fatalf("journal rows %d → %d", before, after)
	}
}
