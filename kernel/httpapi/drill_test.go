package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
)

// TestDrillChainFromKernelEvents replays the live drill's journal exactly
// as the kernel writes it — run.started with the workspace, tool.started of
// run_command, the after-effect fault's tool.failed(effect=uncertain),
// run.failed, all under source "kernel" through the outbox and publisher —
// with the effect really on disk. The operator sees failed_uncertain,
// verifies the workspace file, reconciles effect=occurred citing it over
// HTTP; the listing clears and the history shows the chain.
func TestDrillChainFromKernelEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)

	const project, run = "acme", "drill-1"
	ws := filepath.Join(t.TempDir(), "workspaces", project, run)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	// The effect committed before the injected crash.
	if err := os.WriteFile(filepath.Join(ws, "drill-proof.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := func(id, typ string, at time.Time, data any) kernel.Event {
		ev, err := kernel.NewEvent(kernel.SourceKernel, run+"/"+id, project, run, typ, "kernel", at, data)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	at := t0.Add(-5 * time.Minute)
	if err := outbox.Enqueue(e.Ctx, e.Schema.Pool,
		k("run/started", kernel.TypeRunStarted, at, map[string]any{"plan_summary": "run_command", "workspace": ws}),
		k("op-1/started", kernel.TypeToolStarted, at.Add(time.Second), map[string]any{
			"operation_id": "op-1", "tool": "run_command", "attempt": 1,
			"args": map[string]any{"command": "echo ok > drill-proof.txt", "timeout_s": 30}}),
		k("op-1/failed", kernel.TypeToolFailed, at.Add(2*time.Second), kernel.ToolFailed{
			OperationID: "op-1", ErrorType: "injected_fault", Error: "worker crashed after the effect (KERNEL_FAULT_AFTER_EFFECT)",
			Effect: kernel.EffectUncertain}),
		k("run/failed", kernel.TypeRunFailed, at.Add(3*time.Second), kernel.RunFailed{Error: "operation op-1 failed with an uncertain effect"}),
	); err != nil {
		t.Fatal(err)
	}
	e.Drain()

	r := call(t, "GET", ts.URL+httpapi.PathOperations+"?project="+project, readerTok, "")
	var page struct {
		Operations []operations.Item `json:"operations"`
	}
	if err := json.Unmarshal(r.raw, &page); err != nil || len(page.Operations) != 1 {
		t.Fatalf("listing: %d %s", r.status, r.raw)
	}
	it := page.Operations[0]
	if it.State != operations.StateFailedUncertain || it.OperationID != "op-1" || it.Tool != "run_command" ||
		it.Failure == nil || it.Failure.ErrorType != "injected_fault" || it.StartedKey.SourceID != kernel.SourceKernel {
		t.Fatalf("drill item: %+v", it)
	}

	// The operator checks the workspace and cites the file.
	proof, err := os.ReadFile(filepath.Join(ws, "drill-proof.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(proof)
	body, _ := json.Marshal(map[string]any{
		"project": project, "run_id": run, "operation_id": "op-1", "effect": "occurred",
		"note":     "drill-proof.txt exists in the run's workspace with the command's output",
		"evidence": map[string]any{"workspace_file": filepath.Join(ws, "drill-proof.txt"), "sha256": hex.EncodeToString(sum[:])},
	})
	r = call(t, "POST", ts.URL+httpapi.PathReconcile, operatorTok, string(body))
	if r.status != 201 {
		t.Fatalf("reconcile: %d %s", r.status, r.raw)
	}
	e.Drain()
	r = call(t, "GET", ts.URL+httpapi.PathOperations+"?project="+project, readerTok, "")
	if !strings.Contains(string(r.raw), `"operations":[]`) {
		t.Fatalf("listing after the verdict: %s", r.raw)
	}
	hist := history(t, ts.URL, project, run, "op-1")
	var chain []string
	for _, ev := range hist {
		chain = append(chain, ev.Type+"@"+ev.Actor)
	}
	if strings.Join(chain, " ") != "tool.started@kernel tool.failed@kernel operation.reconciled@operator:ann" {
		t.Fatalf("history chain: %v", chain)
	}
	var d kernel.Reconciliation
	if err := hist[2].DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	if d.Effect != kernel.EffectOccurred || d.Basis != kernel.BasisOperator || !strings.Contains(string(d.Evidence), "drill-proof.txt") ||
		*hist[2].ParentEventID != it.StartedKey {
		t.Fatalf("verdict: %+v parent %v", d, hist[2].ParentEventID)
	}
}
