package operations_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/auth"
	"github.com/seed-7bc021c3/reckon/kernel/fault"
	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/journal"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/kernel/sandbox"
	"github.com/seed-7bc021c3/reckon/kernel/temporalx"
	"github.com/seed-7bc021c3/reckon/pipeline/sweep"
)

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
	conn, err := temporalx.Connect(ctx, temporalx.Options{Namespace: "reckon-ops-drill", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	s := pgtest.New(t)
	j := journal.New(s.Pool, nil)
	pctx, stopPub := context.WithCancel(context.Background())
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		_ = outbox.NewPublisher(s.Pool, j, outbox.Config{PollInterval: 20 * time.Millisecond}, nil, zerolog.Nop()).Run(pctx)
	}()
	defer func() { stopPub(); <-pubDone }()

	_, noBwrap := exec.LookPath("bwrap")
	tools := runner.NewTools(sandbox.NewRunCommand(sandbox.Options{Unconfined: noBwrap != nil}))
	const queue = "ops-live-drill"
	w := runner.NewWorker(conn.Client, queue, &runner.Activities{
		Pool: s.Pool, Journal: j, Tools: tools,
		Fault:      fault.New(s.Pool, fault.Config{AfterEffect: "run_command"}),
		Unconfined: noBwrap != nil, DeliveryPoll: 20 * time.Millisecond, Log: zerolog.Nop(),
	})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	starter := &runner.Starter{Pool: s.Pool, Journal: j, Client: conn.Client, TaskQueue: queue, DataDir: sandboxtest.Dir(t), Tools: tools}

	toks, _ := auth.Parse("rita:reader:" + readerTok + ",ann:operator:" + operatorTok)
	srv := httpapi.New(httpapi.Options{Tokens: toks, Log: zerolog.Nop(), Registry: prometheus.NewRegistry()})
	srv.MountIngest(j, runner.Owners{Pool: s.Pool})
	runner.Mount(srv, starter)
	svc := operations.New(s.Pool, operations.Options{Liveness: operations.NewTemporalLiveness(conn.Client)})
	sweep.MountVerdicts(srv, j, svc)
	svc.Mount(srv)
	ts := newTestServer(t, srv)

	// The whole API is served now: the document matches it both ways.
	rep, err := checkOpenAPI(httpapi.OpenAPI, srv.Routes())
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
		r := call(t, "GET", ts+operations.PathOperations+"?project="+project, readerTok, "")
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
	r := call(t, "POST", ts+operations.PathReconcile, operatorTok, string(body))
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
