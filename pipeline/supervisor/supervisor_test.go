package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/prompts"
)

func testWall() pipeline.Wall {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	seen := t0.Add(time.Hour)
	key := func(op string) kernel.EventKey {
		return kernel.EventKey{SourceID: "kernel", EventID: "run-1/" + op + "/started"}
	}
	return pipeline.Wall{
		Project: "acme", RunID: "run-1", Part: 1, Parts: 1, BuiltAt: t0.Add(time.Hour),
		Operations: []pipeline.WallOperation{
			{OperationID: "op-1", Tool: "run_command", State: "failed_uncertain", StartedAt: t0, StartedKey: key("op-1"),
				Failure: &pipeline.WallFailure{ErrorType: kernel.ErrorTypeInjectedFault, Error: "worker crashed", Effect: "uncertain"}},
			{OperationID: "op-2", Tool: "mcp__create_issue", State: "crash_window", StartedAt: t0, StartedKey: key("op-2"),
				Evidence: []pipeline.Evidence{{Probe: "mcp.lookup_operation", Finding: pipeline.FindingOccurred, Detail: "key seen: issue #7", ObservedAt: seen}}},
			{OperationID: "op-3", Tool: "delegate", State: "crash_window", StartedAt: t0, StartedKey: key("op-3"),
				ChildRunID: "run-1.op-3", ChildOps: &pipeline.ChildSummary{ChildSummary: kernel.ChildSummary{Total: 2, Unresolved: 0}},
				Failure: &pipeline.WallFailure{ErrorType: kernel.ErrorTypeDelegationFail, Error: "child failed", Effect: "uncertain"}},
			{OperationID: "op-4", Tool: "run_command", State: "failed_uncertain", StartedAt: t0, StartedKey: key("op-4"),
				Failure: &pipeline.WallFailure{ErrorType: kernel.ErrorTypeValidation, Error: "bad args"}},
			{OperationID: "op-5", Tool: "run_command", State: "crash_window", StartedAt: t0, JournaledAt: &t0, StartedKey: key("op-5"),
				Evidence: []pipeline.Evidence{
					{Probe: "workspace.postcondition", Finding: pipeline.FindingNone, Detail: "missing", ObservedAt: seen,
						Preconditions: &pipeline.Preconditions{Elapsed: &pipeline.Elapsed{Clock: pipeline.ClockDatabase, Since: t0, At: seen, NeedMS: 90_000}}},
					{Probe: "other", Finding: pipeline.FindingOccurred, Detail: "present", ObservedAt: seen,
						Preconditions: &pipeline.Preconditions{Store: &pipeline.Store{Server: "other", CallUnique: "an id only the call makes"}}}}},
		},
	}
}

// decideValid is Builtin's decision on w, which must pass Validate.
func decideValid(t *testing.T, w pipeline.Wall) pipeline.Decision {
	t.Helper()
	d, err := Builtin{}.Decide(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(w, d); err != nil {
		t.Fatalf("builtin output invalid: %v", err)
	}
	return d
}

func TestBuiltinDecidesOnlyWhatEvidenceSupports(t *testing.T) {
	t.Parallel()
	w := testWall()
	d := decideValid(t, w)
	want := map[string][2]string{
		"op-1": {kernel.EffectUnknown, kernel.BasisInference},  // crash-style failure, no evidence
		"op-2": {kernel.EffectOccurred, kernel.BasisProbe},     // probe proof
		"op-3": {kernel.EffectOccurred, kernel.BasisInference}, // child all settled
		"op-4": {kernel.EffectNone, kernel.BasisInference},     // rejected before the boundary
		"op-5": {kernel.EffectUnknown, kernel.BasisInference},  // contradicting probes
	}
	for _, v := range d.Operations {
		if got := [2]string{v.Effect, v.Basis}; got != want[v.OperationID] {
			t.Errorf("%s: got %v, want %v (note %q)", v.OperationID, got, want[v.OperationID], v.Note)
		}
	}
	if !d.NeedsAttention || len(d.Causes) == 0 || len(d.Remedies) == 0 || d.Lesson == "" {
		t.Fatalf("unknowns must need attention with causes/remedies/lesson: %+v", d)
	}
	if d.Supervisor != BuiltinName || d.PromptVersion != BuiltinVersion {
		t.Fatalf("identity: %q %q", d.Supervisor, d.PromptVersion)
	}
	// Deterministic: the same wall gives the same decision.
	d2, _ := Builtin{}.Decide(context.Background(), w)
	a, _ := json.Marshal(d)
	b, _ := json.Marshal(d2)
	if string(a) != string(b) {
		t.Fatal("builtin is not deterministic")
	}
}

func TestBuiltinAllSettledNeedsNoAttention(t *testing.T) {
	t.Parallel()
	w := testWall()
	w.Operations = w.Operations[1:4]
	if d := decideValid(t, w); d.NeedsAttention {
		t.Fatalf("all decided from evidence, yet needs attention: %+v", d)
	}
}

func TestValidateRejects(t *testing.T) {
	t.Parallel()
	w := testWall()
	good, _ := Builtin{}.Decide(context.Background(), w)
	cases := map[string]struct {
		mut  func(d *pipeline.Decision)
		want string
	}{
		"missing":          {func(d *pipeline.Decision) { d.Operations = d.Operations[1:] }, `missing "op-1"`},
		"duplicate":        {func(d *pipeline.Decision) { d.Operations = append(d.Operations, d.Operations[0]) }, "more than once"},
		"invented":         {func(d *pipeline.Decision) { d.Operations[0].OperationID = "op-99" }, "not an operation of this wall"},
		"effect":           {func(d *pipeline.Decision) { d.Operations[0].Effect = "uncertain" }, "effect must be"},
		"note":             {func(d *pipeline.Decision) { d.Operations[0].Note = strings.Repeat("x", 2001) }, "note is 2001 bytes"},
		"probe w/o proof":  {func(d *pipeline.Decision) { d.Operations[0].Basis = kernel.BasisProbe }, "basis is probe"},
		"unknown w/o attn": {func(d *pipeline.Decision) { d.NeedsAttention = false }, "needs_attention must be true"},
		"no lesson":        {func(d *pipeline.Decision) { d.Lesson = " " }, "lesson must be non-empty"},
		"no causes":        {func(d *pipeline.Decision) { d.Causes = nil }, "causes must be non-empty"},
		"no remedies":      {func(d *pipeline.Decision) { d.Remedies = []string{""} }, "remedies must be non-empty"},
		"operator basis":   {func(d *pipeline.Decision) { d.Operations[1].Basis = kernel.BasisOperator }, "basis must be inference or probe"},
		// op-2's probe found occurred: none contradicts it whatever the basis.
		"contradicts probe": {func(d *pipeline.Decision) {
			d.Operations[1].Effect, d.Operations[1].Basis = kernel.EffectNone, kernel.BasisInference
		}, `"op-2").effect "none" contradicts the probe evidence`},
		// op-5's probes disagree: neither decided effect is allowed.
		"contradicts a conflicting probe": {func(d *pipeline.Decision) { d.Operations[4].Effect = kernel.EffectOccurred }, `"op-5").effect "occurred" contradicts`},
		// op-4 was rejected by the kernel before the execution boundary and
		// op-3's child run ended with every operation settled: facts the
		// kernel recorded, which a model's inference cannot overrule.
		"contradicts a kernel rejection": {func(d *pipeline.Decision) { d.Operations[3].Effect = kernel.EffectOccurred },
			`"op-4").effect "occurred" contradicts a fact the kernel recorded (the kernel reported a failure before the execution boundary`},
		"contradicts a kernel child summary": {func(d *pipeline.Decision) { d.Operations[2].Effect = kernel.EffectNone },
			`"op-3").effect "none" contradicts a fact the kernel recorded (delegated child run run-1.op-3`},
		"proposal from a supervisor": {func(d *pipeline.Decision) { d.Operations[0].ProposedEffect = kernel.EffectNone }, "proposed_effect is set by settlement"},
		// The reconcile path requires a note and the journal stores no NUL:
		// refused here, where the model gets its repair round.
		"blank note":   {func(d *pipeline.Decision) { d.Operations[0].Note = " \n" }, "note is empty"},
		"NUL note":     {func(d *pipeline.Decision) { d.Operations[0].Note = "a\x00b" }, "holds a NUL character"},
		"NUL lesson":   {func(d *pipeline.Decision) { d.Lesson = "a\x00b" }, "lesson is not valid UTF-8 or holds a NUL"},
		"NUL in cause": {func(d *pipeline.Decision) { d.Causes = []string{"a\x00"} }, "causes[0] is not valid UTF-8 or holds a NUL"},
	}
	for name, c := range cases {
		d := good
		d.Operations = append([]pipeline.EffectAnswer(nil), good.Operations...)
		d.Causes = append([]string(nil), good.Causes...)
		d.Remedies = append([]string(nil), good.Remedies...)
		c.mut(&d)
		err := Validate(w, d)
		var ie *InvalidOutputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an InvalidOutputError containing %q", name, err, c.want)
		}
	}
}

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

func newModel(t *testing.T, f *fakeopenai.Server, sl *sleeps) (*OpenAI, *int) {
	t.Helper()
	invalid := new(int)
	m, err := NewOpenAI(OpenAIConfig{
		BaseURL: f.URL, APIKey: "sk-test", Model: "fake-model",
		Sleep: sl.sleep, MaxBackoff: 5 * time.Second, BaseBackoff: 10 * time.Millisecond,
		OnInvalid: func(error) { *invalid++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, invalid
}

func TestOpenAIScriptedOutcomes(t *testing.T) {
	t.Parallel()
	w := testWall()
	cases := []struct {
		name      string
		script    []fakeopenai.Step
		ok        bool
		calls     int
		invalid   int
		sleepsMin []time.Duration
	}{
		{name: "valid", ok: true, calls: 1},
		{name: "429 then valid honours Retry-After", script: []fakeopenai.Step{{Kind: fakeopenai.RateLimited, RetryAfter: "2"}}, ok: true, calls: 2, sleepsMin: []time.Duration{2 * time.Second}},
		{name: "429 Retry-After capped", script: []fakeopenai.Step{{Kind: fakeopenai.RateLimited, RetryAfter: "3600"}}, ok: true, calls: 2, sleepsMin: []time.Duration{5 * time.Second}},
		{name: "500 then valid", script: []fakeopenai.Step{{Kind: fakeopenai.ServerError}}, ok: true, calls: 2},
		{name: "500 forever gives up", script: []fakeopenai.Step{{Kind: fakeopenai.ServerError}, {Kind: fakeopenai.ServerError}, {Kind: fakeopenai.ServerError}, {Kind: fakeopenai.ServerError}}, ok: false, calls: 4},
		{name: "malformed then repaired", script: []fakeopenai.Step{{Kind: fakeopenai.Malformed}}, ok: true, calls: 2, invalid: 1},
		{name: "missing operation twice gives up", script: []fakeopenai.Step{{Kind: fakeopenai.MissingOperation}, {Kind: fakeopenai.MissingOperation}}, ok: false, calls: 2, invalid: 2},
		{name: "invented id twice gives up", script: []fakeopenai.Step{{Kind: fakeopenai.InventedID}, {Kind: fakeopenai.InventedID}}, ok: false, calls: 2, invalid: 2},
		{name: "long note then repaired", script: []fakeopenai.Step{{Kind: fakeopenai.LongNote}}, ok: true, calls: 2, invalid: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := fakeopenai.New()
			defer f.Close()
			f.Script(c.script...)
			sl := &sleeps{}
			m, invalid := newModel(t, f, sl)
			d, err := m.Decide(context.Background(), w)
			if c.ok != (err == nil) {
				t.Fatalf("ok=%v, err=%v", c.ok, err)
			}
			if got := len(f.Calls()); got != c.calls {
				t.Fatalf("calls: got %d, want %d", got, c.calls)
			}
			if *invalid != c.invalid {
				t.Fatalf("invalid outputs: got %d, want %d", *invalid, c.invalid)
			}
			for i, min := range c.sleepsMin {
				if i >= len(sl.d) || sl.d[i] != min {
					t.Fatalf("sleeps %v, want %v", sl.d, c.sleepsMin)
				}
			}
			if err != nil {
				return
			}
			if err := Validate(w, d); err != nil {
				t.Fatal(err)
			}
			if d.Model != "fake-model" || d.PromptVersion != prompts.ReconcileVersion || d.Supervisor != OpenAIName {
				t.Fatalf("identity: %+v", d)
			}
			if d.Usage.PromptTokens == 0 {
				t.Fatal("usage not counted")
			}
			calls := f.Calls()
			last := calls[len(calls)-1]
			if last.Auth != "Bearer sk-test" || !strings.Contains(string(last.Body.ResponseFormat), `"strict":true`) {
				t.Fatalf("request: auth %q format %s", last.Auth, last.Body.ResponseFormat)
			}
			if c.invalid > 0 {
				msgs := last.Body.Messages
				if len(msgs) != 4 || msgs[2].Role != "assistant" || !strings.Contains(msgs[3].Content, "rejected by validation") {
					t.Fatalf("validation error not fed back: %+v", msgs)
				}
			}
		})
	}
}

func TestOpenAIBadRequestIsNotRetried(t *testing.T) {
	t.Parallel()
	f := fakeopenai.New()
	defer f.Close()
	m, _ := newModel(t, f, &sleeps{})
	w := testWall()
	w.Operations = nil // no ids line: the fake answers 400
	if _, err := m.Decide(context.Background(), w); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("want a 400 error, got %v", err)
	}
	if n := len(f.Calls()); n != 1 {
		t.Fatalf("a 400 was retried: %d calls", n)
	}
}

// TestCassettes replays recorded request/response pairs. Set
// RECKON_RECORD_CASSETTES=1 to re-record them from the scripted fake.
func TestCassettes(t *testing.T) {
	t.Parallel()
	w := testWall()
	cases := []struct {
		file   string
		script []fakeopenai.Step
		ok     bool
	}{
		{"valid.json", nil, true},
		{"rate_limited_then_valid.json", []fakeopenai.Step{{Kind: fakeopenai.RateLimited, RetryAfter: "1"}}, true},
		{"invented_id_repaired.json", []fakeopenai.Step{{Kind: fakeopenai.InventedID}}, true},
		{"missing_operation_twice.json", []fakeopenai.Step{{Kind: fakeopenai.MissingOperation}, {Kind: fakeopenai.MissingOperation}}, false},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "cassettes", c.file)
			f := fakeopenai.New()
			defer f.Close()
			if os.Getenv("RECKON_RECORD_CASSETTES") == "1" {
				f.Script(c.script...)
				f.Record("supervisor test wall: " + c.file)
			} else if err := f.Replay(path); err != nil {
				t.Fatal(err)
			}
			m, _ := newModel(t, f, &sleeps{})
			_, err := m.Decide(context.Background(), w)
			if c.ok != (err == nil) {
				t.Fatalf("ok=%v, err=%v", c.ok, err)
			}
			if os.Getenv("RECKON_RECORD_CASSETTES") == "1" {
				raw, _ := json.MarshalIndent(f.Recording(), "", "  ")
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// rawServer answers every chat completion with body, counting calls.
func rawServer(t *testing.T, body func() []byte) (url string, calls *int) {
	t.Helper()
	calls = new(int)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body())
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", calls
}

// completionBody is a chat.completion answering content with usage.
func completionBody(content string, prompt, completion int) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-raw", "object": "chat.completion", "created": 1790000000, "model": "raw",
		"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage":   map[string]int{"prompt_tokens": prompt, "completion_tokens": completion},
	})
	return b
}

// TestOpenAIResponseBodyIsBounded: a compromised or broken endpoint that
// answers more than MaxResponseBytes fails the call, once, instead of the
// whole body being read into memory (go-openai reads bodies whole) and
// sent again as the repair round's assistant message.
func TestOpenAIResponseBodyIsBounded(t *testing.T) {
	t.Parallel()
	huge := completionBody(strings.Repeat("x", 1<<20), 1, 1)
	url, calls := rawServer(t, func() []byte { return huge })
	m, err := NewOpenAI(OpenAIConfig{BaseURL: url, Model: "raw", MaxResponseBytes: 64 << 10, Sleep: (&sleeps{}).sleep})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Decide(context.Background(), testWall())
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("want the size bound's error, got %v", err)
	}
	if *calls != 1 {
		t.Fatalf("%d calls: an oversized answer was retried or repaired", *calls)
	}
}

// TestOpenAIUsageIsNeverNegative: the server's usage counts go into the
// sweep's token budget; a negative count would buy more than the budget.
func TestOpenAIUsageIsNeverNegative(t *testing.T) {
	t.Parallel()
	w := testWall()
	var ops []string
	for _, id := range w.OperationIDs() {
		ops = append(ops, fmt.Sprintf(`{"operation_id":%q,"effect":"unknown","basis":"inference","note":"n"}`, id))
	}
	answer := `{"needs_attention":true,"causes":["c"],"remedies":["r"],"lesson":"l","operations":[` + strings.Join(ops, ",") + `]}`
	url, _ := rawServer(t, func() []byte { return completionBody(answer, -1_000_000, -1_000_000) })
	m, err := NewOpenAI(OpenAIConfig{BaseURL: url, Model: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.Decide(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if d.Usage.PromptTokens < 0 || d.Usage.CompletionTokens < 0 {
		t.Fatalf("negative usage counted: %+v", d.Usage)
	}
}

// TestOpenAICallTimeoutWithSuppliedClient: a caller's HTTPClient carries no
// timeout of its own, and the endpoint accepts the request but never
// answers. Each model call is still bounded by OpenAIConfig.Timeout and
// fails with an error that says so, instead of holding the wall (and the
// run's triage lock) until the sweep's much longer wall timeout.
func TestOpenAICallTimeoutWithSuppliedClient(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: lets Close return
	const timeout = 200 * time.Millisecond
	m, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "silent", HTTPClient: &http.Client{},
		Timeout: timeout, MaxAttempts: 2, Sleep: (&sleeps{}).sleep})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = m.Decide(ctx, testWall())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("want the call timeout's error, got %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error does not wrap the deadline: %v", err)
	}
	// Two attempts of 200ms each, with the test's sleeps not sleeping.
	if took > 5*time.Second || ctx.Err() != nil {
		t.Fatalf("Decide took %s: the call was bounded by the caller's context, not OpenAIConfig.Timeout", took)
	}
}
