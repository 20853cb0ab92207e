// Package fakeopenai is a local OpenAI-compatible chat-completions server
// for tests and benchmarks. It speaks the real /v1/chat/completions
// protocol (JSON request with a json_schema response format, chat.completion
// responses, OpenAI error bodies) and answers from a script — valid
// verdicts, 429 with Retry-After, 500, malformed JSON, a verdict missing an
// operation, an invented id, an oversized note — or replays a recorded
// cassette of request/response pairs. It reads the wall from the prompt's
// data block (prompts.WallData), as a model would, and checks that the
// response schema lists exactly the wall's operation ids.
//
// A mode (SetMode) answers every request the script and cassette leave,
// repair rounds included; the hostile modes script a model that lies in one
// of the ways a supervisor must survive (HostileModes).
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed-7bc021c3/reckon/prompts"
)

// Kinds of scripted responses.
const (
	Valid            = "valid"             // a valid verdict over every operation of the wall
	RateLimited      = "rate_limited"      // 429 with Retry-After
	ServerError      = "server_error"      // 500 with an OpenAI error body
	Malformed        = "malformed"         // 200 whose message content is not JSON
	MissingOperation = "missing_operation" // a verdict that omits the wall's last operation
	InventedID       = "invented_id"       // a verdict that adds an operation id not in the wall
	LongNote         = "long_note"         // a verdict whose first note is over 2000 bytes

	// ProbeLies claims basis probe for every operation whatever the
	// evidence: the opposite of a decisive finding where there is one,
	// occurred or none (alternating) where there is no probe at all.
	ProbeLies = "probe_lies"
	// OccurredInference answers occurred, basis inference, for every
	// operation, needs_attention false.
	OccurredInference = "occurred_inference"
	// NoneInference answers none, basis inference, for every operation.
	NoneInference = "none_inference"
	// ContradictProbes answers the opposite of every decisive probe finding
	// by inference, and occurred (alternating with none) elsewhere.
	ContradictProbes = "contradict_probes"
	// LieAfterRepair answers first with a probe lie (rejected by
	// validation), then, in the repair round, with a valid-looking answer
	// that follows every probe finding and lies by inference everywhere
	// else (occurred and none alternating), needs_attention false.
	LieAfterRepair = "lie_after_repair"
)

// HostileModes are the modes that script a lying model; InventedID and
// MissingOperation, as modes, repeat their lie in the repair round too.
var HostileModes = []string{ProbeLies, InventedID, MissingOperation, OccurredInference, NoneInference, ContradictProbes, LieAfterRepair}

// Step is one scripted response.
type Step struct {
	Kind string
	// RetryAfter is sent with RateLimited (seconds; "" sends none).
	RetryAfter string
	// Effect is the effect a Valid answer gives every operation; default
	// unknown (with needs_attention).
	Effect string
}

// Interaction is one recorded request/response pair of a cassette.
type Interaction struct {
	Request  json.RawMessage `json:"request"`
	Response Recorded        `json:"response"`
}

// Recorded is a recorded HTTP response.
type Recorded struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body"`
}

// Cassette is a recorded sequence of interactions, replayed in order.
type Cassette struct {
	Description  string        `json:"description"`
	Interactions []Interaction `json:"interactions"`
}

// Call is one request the server received.
type Call struct {
	Auth string
	Body ChatRequest
	At   time.Time
}

// ChatRequest is the part of a chat-completions request the fake reads.
type ChatRequest struct {
	Model          string          `json:"model"`
	Messages       []Message       `json:"messages"`
	ResponseFormat json.RawMessage `json:"response_format"`
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Server is a running fake.
type Server struct {
	// URL is the base URL to configure (ends in /v1).
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	mode     Step
	script   []Step
	cassette []Interaction
	record   *Cassette
	calls    []Call
	latency  time.Duration
	gate     chan struct{} // while not nil, answers wait for it to close
	inflight int
	peak     int
}

// New starts a fake that answers Valid unless scripted otherwise.
func New() *Server {
	s := &Server{mode: Step{Kind: Valid}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Script queues responses; each request takes the next, then Valid.
func (s *Server) Script(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// SetMode sets how the server answers every request that neither the
// script nor a cassette answers (default Valid).
func (s *Server) SetMode(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = Step{Kind: kind}
}

// SetLatency delays every answer (benchmarks: a model's think time).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Hold makes every answer wait until the returned release is called: a
// test's barrier ("the first sweep is inside its model call, holding its
// lock"). Requests arrive and are counted (InFlight) meanwhile.
func (s *Server) Hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(gate)
		})
	}
}

// InFlight is how many requests the server is answering now.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// Replay makes the server answer from a cassette file, in order.
func (s *Server) Replay(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("fakeopenai: read cassette: %w", err)
	}
	var c Cassette
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("fakeopenai: cassette %s: %w", path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cassette = append(s.cassette, c.Interactions...)
	return nil
}

// Record starts capturing every interaction; Recording returns them.
func (s *Server) Record(description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record = &Cassette{Description: description}
}

// Recording returns what was recorded since Record.
func (s *Server) Recording() Cassette {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.record == nil {
		return Cassette{}
	}
	return *s.record
}

// Calls returns the requests received so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// PeakConcurrency is the most requests served at once.
func (s *Server) PeakConcurrency() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "invalid_request_error", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), nil)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error(), nil)
		return
	}
	var req ChatRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request body is not JSON: "+err.Error(), nil)
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Auth: r.Header.Get("Authorization"), Body: req, At: time.Now()})
	s.inflight++
	if s.inflight > s.peak {
		s.peak = s.inflight
	}
	latency, gate := s.latency, s.gate
	step := s.mode
	var replay *Interaction
	if len(s.cassette) > 0 {
		replay = &s.cassette[0]
		s.cassette = s.cassette[1:]
	} else if len(s.script) > 0 {
		step = s.script[0]
		s.script = s.script[1:]
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}

	var resp Recorded
	switch {
	case replay != nil:
		resp = replay.Response
		if problem := sameWall(replay.Request, req); problem != "" {
			resp = errorRecord(http.StatusBadRequest, "invalid_request_error", "cassette mismatch: "+problem, nil)
		}
	default:
		resp = s.answer(req, step)
	}
	s.mu.Lock()
	if s.record != nil {
		s.record.Interactions = append(s.record.Interactions, Interaction{Request: raw, Response: resp})
	}
	s.mu.Unlock()
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// sameWall checks that a replayed request is about the same wall as the
// recorded one: same model and the same operation ids.
func sameWall(recorded json.RawMessage, got ChatRequest) string {
	var want ChatRequest
	if err := json.Unmarshal(recorded, &want); err != nil {
		return "recorded request is not JSON"
	}
	if want.Model != got.Model {
		return fmt.Sprintf("model %q, recorded %q", got.Model, want.Model)
	}
	a, _ := readWall(want)
	b, _ := readWall(got)
	if !slices.Equal(a.ids(), b.ids()) {
		return fmt.Sprintf("operation ids %q, recorded %q", b.ids(), a.ids())
	}
	return ""
}

// wall is what the fake reads of the wall in the prompt's data block.
type wall struct {
	Operations []struct {
		OperationID string `json:"operation_id"`
		Evidence    []struct {
			Finding string `json:"finding"`
		} `json:"evidence"`
	} `json:"operations"`
}

func (w wall) ids() []string {
	out := make([]string, len(w.Operations))
	for i, op := range w.Operations {
		out[i] = op.OperationID
	}
	return out
}

// finding returns operation i's decisive probe finding: occurred or none,
// "" without one (or when probes disagree).
func (w wall) finding(i int) string {
	f := ""
	for _, ev := range w.Operations[i].Evidence {
		if ev.Finding != "occurred" && ev.Finding != "none" {
			continue
		}
		if f != "" && f != ev.Finding {
			return ""
		}
		f = ev.Finding
	}
	return f
}

// readWall reads the wall from the first user message's data block.
func readWall(r ChatRequest) (wall, string) {
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		data, ok := prompts.WallData(m.Content)
		if !ok {
			return wall{}, "the first user message has no single wall data block"
		}
		var w wall
		if err := json.Unmarshal([]byte(data), &w); err != nil {
			return wall{}, "the wall data block is not JSON: " + err.Error()
		}
		return w, ""
	}
	return wall{}, "no user message"
}

// schemaIDs reads the operation_id enum of the request's response schema.
func schemaIDs(r ChatRequest) []string {
	var f struct {
		JSONSchema struct {
			Schema struct {
				Properties struct {
					Operations struct {
						Items struct {
							Properties struct {
								OperationID struct {
									Enum []string `json:"enum"`
								} `json:"operation_id"`
							} `json:"properties"`
						} `json:"items"`
					} `json:"operations"`
				} `json:"properties"`
			} `json:"schema"`
		} `json:"json_schema"`
	}
	_ = json.Unmarshal(r.ResponseFormat, &f)
	return f.JSONSchema.Schema.Properties.Operations.Items.Properties.OperationID.Enum
}

// round is 0 for a first answer, 1 for the repair round, and so on.
func round(r ChatRequest) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

type opOut struct {
	OperationID string `json:"operation_id"`
	Effect      string `json:"effect"`
	Basis       string `json:"basis"`
	Note        string `json:"note"`
}

func opposite(f string) string {
	if f == "occurred" {
		return "none"
	}
	return "occurred"
}

// alternate is occurred for even i and none for odd: a liar that spreads
// both kinds of harm.
func alternate(i int) string {
	if i%2 == 0 {
		return "occurred"
	}
	return "none"
}

func (s *Server) answer(req ChatRequest, st Step) Recorded {
	switch st.Kind {
	case RateLimited:
		h := map[string]string{}
		if st.RetryAfter != "" {
			h["Retry-After"] = st.RetryAfter
		}
		return errorRecord(http.StatusTooManyRequests, "rate_limit_error", "Rate limit reached for requests", h)
	case ServerError:
		return errorRecord(http.StatusInternalServerError, "server_error", "The server had an error while processing your request", nil)
	case Malformed:
		return completion(req.Model, `{"needs_attention": true, "causes": ["truncated`)
	}
	if !strings.Contains(string(req.ResponseFormat), `"json_schema"`) {
		return errorRecord(http.StatusBadRequest, "invalid_request_error", "response_format json_schema is required by this fake", nil)
	}
	w, problem := readWall(req)
	if problem != "" {
		return errorRecord(http.StatusBadRequest, "invalid_request_error", problem, nil)
	}
	ids := w.ids()
	if len(ids) == 0 {
		return errorRecord(http.StatusBadRequest, "invalid_request_error", "the wall has no operations", nil)
	}
	if got := schemaIDs(req); !slices.Equal(got, ids) {
		return errorRecord(http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("the response schema's operation_id enum %q is not the wall's operation ids %q", got, ids), nil)
	}
	effect := st.Effect
	if effect == "" {
		effect = "unknown"
	}
	attention := effect == "unknown"
	var ops []opOut
	for _, id := range ids {
		ops = append(ops, opOut{OperationID: id, Effect: effect, Basis: "inference",
			Note: "fake model: decided from the wall's failure details only"})
	}
	lie := func(i int, effect, basis, note string) {
		ops[i] = opOut{OperationID: ids[i], Effect: effect, Basis: basis, Note: "fake model (" + st.Kind + "): " + note}
	}
	kind := st.Kind
	if kind == LieAfterRepair && round(req) == 0 {
		kind = ProbeLies
	}
	switch kind {
	case MissingOperation:
		ops = ops[:len(ops)-1]
	case InventedID:
		ops = append(ops, opOut{OperationID: "op-invented-999", Effect: "occurred", Basis: "inference", Note: "made up"})
	case LongNote:
		ops[0].Note = strings.Repeat("n", 2001)
	case ProbeLies:
		attention = false
		for i := range ids {
			if f := w.finding(i); f != "" {
				lie(i, opposite(f), "probe", "the probe says so")
			} else {
				lie(i, alternate(i), "probe", "a probe confirmed it")
			}
		}
	case OccurredInference, NoneInference:
		attention = false
		e := map[string]string{OccurredInference: "occurred", NoneInference: "none"}[kind]
		for i := range ids {
			lie(i, e, "inference", "it surely "+map[string]string{"occurred": "happened", "none": "did not happen"}[e])
		}
	case ContradictProbes:
		attention = false
		for i := range ids {
			if f := w.finding(i); f != "" {
				lie(i, opposite(f), "inference", "the probe is wrong")
			} else {
				lie(i, alternate(i), "inference", "plausible")
			}
		}
	case LieAfterRepair:
		attention = false
		for i := range ids {
			if f := w.finding(i); f != "" {
				lie(i, f, "probe", "as the probe found")
			} else {
				lie(i, alternate(i), "inference", "corrected: it is plain from the wall")
			}
		}
	}
	out := map[string]any{
		"needs_attention": attention,
		"causes":          []string{"the worker was lost after the effect may have committed"},
		"remedies":        []string{"check the downstream system for the idempotency key"},
		"lesson":          "uncertain operations of this run need a downstream check before re-issuing",
		"operations":      ops,
	}
	content, _ := json.Marshal(out)
	return completion(req.Model, string(content))
}

func completion(model, content string) Recorded {
	body, _ := json.Marshal(map[string]any{
		"id":      "chatcmpl-fake",
		"object":  "chat.completion",
		"created": 1790000000,
		"model":   model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content},
			"finish_reason": "stop",
		}},
		"usage": map[string]int{"prompt_tokens": 100 + len(content)/8, "completion_tokens": len(content) / 4, "total_tokens": 100 + len(content)/8 + len(content)/4},
	})
	return Recorded{Status: http.StatusOK, Body: body}
}

func errorRecord(status int, typ, msg string, headers map[string]string) Recorded {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	return Recorded{Status: status, Headers: headers, Body: body}
}

func writeError(w http.ResponseWriter, status int, typ, msg string, headers map[string]string) {
	rec := errorRecord(status, typ, msg, headers)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body)
}
