package app

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/reckontest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/outbox"
	"github.com/seed-7bc021c3/reckon/kernel/webhook"
)

// The files of the deployment kit whose queries name reckon's series.
var deployQueryFiles = []string{"../../deploy/prometheus/reckon-alerts.yml", "../../deploy/grafana/reckon.json"}

// seriesName is a series reckon exports as a query or a text names it.
var seriesName = regexp.MustCompile(`\breckon_[a-z0-9_]*[a-z0-9]\b`)

// TestDeployQueriesNameExportedSeries: every series the alerting rules
// and the Grafana dashboard name is one a running dev stack exports on
// /metrics, once it has done what moves each (an agent's failed run, a
// scheduled sweep and its verdicts, an operator's ruling, a parked
// conflict, a run waiting for a settlement, webhooks delivered). The
// stack's webhook endpoint hears of the attention, the ruling and the
// park.
func TestDeployQueriesNameExportedSeries(t *testing.T) {
	t.Parallel()
	want := map[string][]string{}
	for _, f := range deployQueryFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range seriesName.FindAllString(string(raw), -1) {
			if !slices.Contains(want[name], f) {
				want[name] = append(want[name], f)
			}
		}
	}
	if len(want) < 15 {
		t.Fatalf("only %d series named in %v", len(want), deployQueryFiles)
	}

	hook := &hookReceiver{}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	st := startOncallStack(t, srv.URL)
	h := &hostile{t: t, st: st, base: "http://" + st.APIAddr}
	seedOncall(t, st)

	reckontest.Eventually(t, 90*time.Second, "the sweep's unknown in the operator's queue", func() bool {
		_, out := h.call(http.MethodGet, "/v1/agent/operations/attention?project=acme", annTok, nil)
		ops, _ := out["operations"].([]any)
		return len(ops) == 1
	})
	ruling := map[string]any{"project": "acme", "run_id": "ext-1", "operation_id": "op-1", "effect": "none", "note": "checked by hand"}
	if code, out := h.call(http.MethodPost, "/v1/agent/operations/reconcile", annTok, ruling); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("reconcile: %d %v", code, out)
	}

	var missing []string
	ok := reckontest.Poll(90*time.Second, func() bool {
		got := scrapeNames(t, h.base+"/metrics")
		missing = missing[:0]
		for name := range want {
			if !got[name] {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0 && hook.has(webhook.EventAttention, webhook.EventSettled, webhook.EventConflictParked)
	})
	if !ok {
		sort.Strings(missing)
		for _, name := range missing {
			t.Errorf("%s (named in %s) is not exported", name, strings.Join(want[name], ", "))
		}
		t.Fatalf("webhooks received: %v", hook.events())
	}
}

// startOncallStack starts the dev stack with its scheduled sweep every
// second and every webhook event sent to url.
func startOncallStack(t *testing.T, url string) *Stack {
	t.Helper()
	s := pgtest.New(t)
	env := map[string]string{
		"DATABASE_URL": s.URL, "RECKON_DATA_DIR": sandboxtest.Dir(t), "RECKON_HTTP_ADDR": "127.0.0.1:0",
		"RECKON_TOKENS":          "bot:agent:" + botTok + ",ann:operator:" + annTok,
		"RECKON_TRIAGE_SCHEDULE": "@every 1s", "RECKON_LOG_LEVEL": "error",
		"RECKON_WEBHOOKS": `[{"url":"` + url + `","secret":"a-test-signing-key-of-32-bytes!!",` +
			`"events":["attention","settled","run.awaiting","conflict.parked"]}]`,
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		env["RECKON_SANDBOX_UNCONFINED"] = "1"
	}
	st, err := StartDev(context.Background(), testConfig(t, env), DevConfig{Kernel: KernelConfig{InMemory: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.StartPipeline(st.Operations); err != nil {
		t.Fatal(err)
	}
	return st
}

// seedOncall writes what moves the on-call series: an agent's run that
// failed with an uncertain operation (the sweep settles it unknown), an
// operation of a run the journal never saw start (unresolved, left by the
// sweep: its liveness is unknown), a kernel run waiting for a settlement
// (written into the journal's table as a journal that knows run.awaiting
// would), and a kernel event parked on a conflict.
func seedOncall(t *testing.T, st *Stack) {
	t.Helper()
	ctx := context.Background()
	ago := time.Now().UTC().Add(-time.Hour)
	ext := reckontest.Run{Project: "acme", RunID: "ext-1", Source: "bot"}
	orphan := reckontest.Run{Project: "acme", RunID: "ext-2", Source: "bot"}
	k := reckontest.Run{Project: "acme", RunID: "k-1", Source: kernel.SourceKernel}
	evs := []kernel.Event{
		ext.RunStarted(ago), ext.Started("op-1", "run_command", ago), ext.Failed("op-1", kernel.EffectUncertain, ago), ext.RunFailed(ago),
		orphan.Started("op-9", "run_command", ago),
		k.Completed("op-1", ago),
	}
	if _, err := st.Journal.Ingest(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `
INSERT INTO journal_events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id)
VALUES ('kernel', 'k-2/run/awaiting/op-1', 'acme', 'k-2', 'run.awaiting', now(), 'kernel', '{"operation_id":"op-1"}', '\x00', 'op-1')`); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Enqueue(ctx, st.Pool, k.Completed("op-1", ago.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
}

// scrapeNames is every series name a /metrics answer holds, a histogram's
// and a summary's with their suffixes.
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for name, f := range fams {
		if len(f.GetMetric()) == 0 {
			continue
		}
		out[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name+"_sum"], out[name+"_count"] = true, true
		}
	}
	return out
}

// hookReceiver is the stack's webhook endpoint: it records the type of
// every notification whose signature verifies.
type hookReceiver struct {
	mu    sync.Mutex
	types map[string]int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sec, _ := strconv.ParseInt(r.Header.Get(webhook.HeaderTimestamp), 10, 64)
	if webhook.Sign([]byte("a-test-signing-key-of-32-bytes!!"), r.Header.Get(webhook.HeaderID), time.Unix(sec, 0), body) != r.Header.Get(webhook.HeaderSignature) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var p webhook.Payload
	_ = json.Unmarshal(body, &p)
	h.mu.Lock()
	if h.types == nil {
		h.types = map[string]int{}
	}
	h.types[p.Type]++
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) has(events ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range events {
		if h.types[e] == 0 {
			return false
		}
	}
	return true
}

func (h *hookReceiver) events() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.types)
}
