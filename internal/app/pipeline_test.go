package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

func testConfig(t *testing.T, env map[string]string) config.Config {
	t.Helper()
	cfg, err := config.LoadFrom(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestNewSupervisorFromConfig(t *testing.T) {
	t.Parallel()
	sup, err := NewSupervisor(testConfig(t, nil), nil)
	if err != nil || sup.Name() != supervisor.BuiltinName {
		t.Fatalf("unset: %v %v", sup, err)
	}
	f := fakeopenai.New()
	defer f.Close()
	sup, err = NewSupervisor(testConfig(t, map[string]string{
		"RECKON_SUPERVISOR_BASE_URL": f.URL, "RECKON_SUPERVISOR_MODEL": "m", "RECKON_SUPERVISOR_API_KEY": "k",
	}), nil)
	if err != nil || sup.Name() != supervisor.OpenAIName {
		t.Fatalf("set: %v %v", sup, err)
	}
}

// StartPipeline runs the scheduled sweep in the stack's lifetime; the
// verdicts endpoint serves its verdicts.
func TestStartPipeline(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	cfg := testConfig(t, map[string]string{
		"DATABASE_URL": s.URL, "RECKON_TRIAGE_SCHEDULE": "@every 1s", "RECKON_DATA_DIR": t.TempDir(),
		"RECKON_TOKENS": "r:reader:secret-reader", "RECKON_MCP_SERVERS": `[{"name":"issues","url":"http://127.0.0.1:1/mcp"}]`,
	})
	core, err := NewCore(context.Background(), cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	probes, err := core.NewProbes()
	if err != nil || len(probes) != 4 {
		t.Fatalf("probes: %v %v", probes, err)
	}
	if _, ok := probes[2].(probe.Diff); !ok {
		t.Fatalf("third probe: %T", probes[2])
	}
	if _, ok := probes[3].(probe.MCP); !ok {
		t.Fatalf("fourth probe: %T", probes[3])
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &Stack{Core: core, ctx: ctx, cancel: cancel}
	defer st.Close()

	t0 := time.Now().UTC().Add(-time.Hour)
	mk := func(id, typ string, data any) kernel.Event {
		ev, err := kernel.NewEvent(kernel.SourceKernel, id, "acme", "run-1", typ, "kernel", t0, data)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if _, err := core.Journal.Ingest(context.Background(), []kernel.Event{
		mk("run-1/run/started", kernel.TypeRunStarted, map[string]any{}),
		mk("run-1/op-1/started", kernel.TypeToolStarted, kernel.ToolStarted{OperationID: "op-1", Tool: "run_command"}),
		mk("run-1/run/failed", kernel.TypeRunFailed, kernel.RunFailed{Error: "x"}),
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.StartPipeline(nil); err != nil {
		t.Fatal(err)
	}
	pub := core.NewPublisher(outbox.Config{})
	reckontest.Eventually(t, 15*time.Second, "a verdict from the scheduled sweep", func() bool {
		if err := pub.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		evs, err := core.Journal.EventsOfType(context.Background(), "acme", kernel.TypeSupervisorVerdict, time.Time{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) == 1
	})
	api, err := core.NewAPI(nil, core.OperationsService(nil))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	defer hs.Close()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/supervisor/verdicts?project=acme", nil)
	req.Header.Set("Authorization", "Bearer secret-reader")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("verdicts endpoint: %d", resp.StatusCode)
	}
	// A second sweeper in the same process shares the metrics.
	if _, err := core.NewSweeper(core.OperationsService(nil)); err != nil {
		t.Fatal(err)
	}
}
