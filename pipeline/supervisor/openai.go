package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/sashabaranov/go-openai/jsonschema"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
	"github.com/seed-7bc021c3/reckon/prompts"
)

// OpenAIName names the model supervisor in every verdict.
const OpenAIName = "openai"

// OpenAIConfig configures the OpenAI-compatible supervisor. Zero values
// take the defaults.
type OpenAIConfig struct {
	BaseURL string // e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1
	APIKey  string
	Model   string
	// HTTPClient replaces the default client (tests, cassettes, proxies).
	HTTPClient *http.Client
	// MaxAttempts bounds transport attempts per wall (429/5xx/network);
	// default 4.
	MaxAttempts int
	// BaseBackoff is the first retry delay, doubled per attempt with
	// jitter; default 500ms.
	BaseBackoff time.Duration
	// MaxBackoff caps every wait, including a server's Retry-After, so one
	// wall never stalls a sweep; default 30s.
	MaxBackoff time.Duration
	// Timeout bounds one model call (one HTTP attempt, its answer read
	// whole), also through a supplied HTTPClient, whose own Timeout may be
	// unset; default 2m.
	Timeout time.Duration
	// MaxResponseBytes bounds one HTTP response body, error bodies
	// included; default DefaultMaxResponseBytes. A longer one fails the
	// call without being retried.
	MaxResponseBytes int64
	// Sleep waits between attempts; tests inject a recorder. Default
	// sleeps honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Observe, when set, receives the latency of every model call.
	Observe func(d time.Duration, outcome string)
	// OnInvalid, when set, is told of every output that failed validation.
	OnInvalid func(err error)
}

// OpenAI is the supervisor backed by any OpenAI-compatible chat-completions
// endpoint, with JSON-schema structured output. It retries 429 and 5xx with
// backoff (honouring Retry-After, capped), feeds a validation error back to
// the model once, and otherwise gives up on the wall with an error the sweep
// reports; it never writes anything.
type OpenAI struct {
	cfg    OpenAIConfig
	client *openai.Client
}

var _ pipeline.Supervisor = (*OpenAI)(nil)

// NewOpenAI returns the model supervisor; BaseURL and Model are required.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if cfg.BaseURL == "" {
		return nil, kernel.Errorf(kernel.EInvalid, "supervisor: RECKON_SUPERVISOR_BASE_URL is required for the OpenAI-compatible supervisor")
	}
	if cfg.Model == "" {
		return nil, kernel.Errorf(kernel.EInvalid, "supervisor: RECKON_SUPERVISOR_MODEL is required for the OpenAI-compatible supervisor")
	}
	cfg.MaxAttempts = defaults.Positive(cfg.MaxAttempts, 4)
	cfg.BaseBackoff = defaults.Positive(cfg.BaseBackoff, 500*time.Millisecond)
	cfg.MaxBackoff = defaults.Positive(cfg.MaxBackoff, 30*time.Second)
	cfg.Timeout = defaults.Positive(cfg.Timeout, 2*time.Minute)
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	cfg.MaxResponseBytes = defaults.Positive(cfg.MaxResponseBytes, DefaultMaxResponseBytes)
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	// No client Timeout: each call's context carries cfg.Timeout (see
	// complete), so a supplied client is bounded too, and a stuck call
	// fails with one error that names the bound.
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	// go-openai reads whole bodies (io.ReadAll, an unbounded decoder): a
	// compromised or broken endpoint could otherwise answer gigabytes
	// within the timeout and take the sweep's process down with it.
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = limitTransport{base: base, max: cfg.MaxResponseBytes}
	oc.HTTPClient = hc
	return &OpenAI{cfg: cfg, client: openai.NewClientWithConfig(oc)}, nil
}

// Name implements pipeline.Supervisor.
func (s *OpenAI) Name() string { return OpenAIName }

// modelOutput is the JSON object the model must answer with (the response
// schema's shape).
type modelOutput struct {
	NeedsAttention bool           `json:"needs_attention"`
	Causes         []string       `json:"causes"`
	Remedies       []string       `json:"remedies"`
	Lesson         string         `json:"lesson"`
	Operations     []modelVerdict `json:"operations"`
}

// modelVerdict is one operation's verdict as the model answers it: exactly
// the schema's fields, so an answer carrying anything else (a
// proposed_effect, say) is rejected as not the schema's object.
type modelVerdict struct {
	OperationID string `json:"operation_id"`
	Effect      string `json:"effect"`
	Basis       string `json:"basis"`
	Note        string `json:"note"`
}

// ResponseSchema is the strict JSON schema of modelOutput sent as the
// structured-output response format. ids are the wall's operation ids: the
// schema lists them as the only values of operation_id, so a server that
// enforces schemas cannot emit an invented id (validation still checks
// everything, since not every server enforces them).
func ResponseSchema(ids []string) *jsonschema.Definition {
	str := jsonschema.Definition{Type: jsonschema.String}
	strs := jsonschema.Definition{Type: jsonschema.Array, Items: &str}
	op := jsonschema.Definition{
		Type: jsonschema.Object,
		Properties: map[string]jsonschema.Definition{
			"operation_id": {Type: jsonschema.String, Enum: append([]string(nil), ids...), Description: "an operation id of the wall, exactly as given"},
			"effect":       {Type: jsonschema.String, Enum: []string{kernel.EffectNone, kernel.EffectOccurred, kernel.EffectUnknown}},
			"basis":        {Type: jsonschema.String, Enum: []string{kernel.BasisInference, kernel.BasisProbe}},
			"note":         {Type: jsonschema.String, Description: fmt.Sprintf("what the decision rests on, at most %d bytes", kernel.MaxNoteBytes)},
		},
		Required:             []string{"operation_id", "effect", "basis", "note"},
		AdditionalProperties: false,
	}
	return &jsonschema.Definition{
		Type: jsonschema.Object,
		Properties: map[string]jsonschema.Definition{
			"needs_attention": {Type: jsonschema.Boolean},
			"causes":          strs,
			"remedies":        strs,
			"lesson":          str,
			"operations":      {Type: jsonschema.Array, Items: &op},
		},
		Required:             []string{"needs_attention", "causes", "remedies", "lesson", "operations"},
		AdditionalProperties: false,
	}
}

// promptWall is the wall as the model reads it, inside the prompt's data
// block: the wall's own fields (agent-reported ones marked as such), with
// the run's earlier verdicts reduced to earlier opinions — what an earlier
// supervisor concluded, never an instruction — and no digest (it is the
// digest of this very content).
type promptWall struct {
	Project         string                   `json:"project"`
	RunID           string                   `json:"run_id"`
	Part            int                      `json:"part"`
	Parts           int                      `json:"parts"`
	BuiltAt         time.Time                `json:"built_at"`
	Operations      []pipeline.WallOperation `json:"operations"`
	EarlierOpinions []earlierOpinion         `json:"earlier_opinions,omitempty"`
}

// earlierOpinion is an earlier supervisor verdict on the run, as an opinion.
type earlierOpinion struct {
	RecordedAt     time.Time `json:"recorded_at"`
	Supervisor     string    `json:"supervisor"`
	Model          string    `json:"model,omitempty"`
	NeedsAttention bool      `json:"needs_attention"`
	OperationIDs   []string  `json:"operation_ids"`
	Causes         []string  `json:"causes,omitempty"`
	Lesson         string    `json:"lesson,omitempty"`
}

func newPromptWall(w pipeline.Wall) promptWall {
	p := promptWall{Project: w.Project, RunID: w.RunID, Part: w.Part, Parts: w.Parts, BuiltAt: w.BuiltAt, Operations: w.Operations}
	if p.Operations == nil {
		p.Operations = []pipeline.WallOperation{}
	}
	for _, ev := range w.EarlierVerdicts {
		v := ev.Verdict
		p.EarlierOpinions = append(p.EarlierOpinions, earlierOpinion{RecordedAt: ev.TS, Supervisor: v.Supervisor, Model: v.Model,
			NeedsAttention: v.NeedsAttention, OperationIDs: v.OperationIDs, Causes: v.Causes, Lesson: v.Lesson})
	}
	return p
}

// RenderPrompt renders the reconciliation prompt the model is sent for w.
func RenderPrompt(w pipeline.Wall) (prompts.Reconcile, error) {
	return prompts.RenderReconcile(prompts.ReconcileData{Wall: newPromptWall(w), Operations: len(w.Operations), Part: w.Part, Parts: w.Parts})
}

// Decide implements pipeline.Supervisor.
func (s *OpenAI) Decide(ctx context.Context, w pipeline.Wall) (pipeline.Decision, error) {
	p, err := RenderPrompt(w)
	if err != nil {
		return pipeline.Decision{}, err
	}
	msgs := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: p.System},
		{Role: openai.ChatMessageRoleUser, Content: p.User},
	}
	schema := ResponseSchema(w.OperationIDs())
	var usage pipeline.Usage
	var lastInvalid error
	// One answer, and at most one more after feeding back its problem.
	for round := 0; round < 2; round++ {
		content, u, err := s.complete(ctx, msgs, schema)
		usage.PromptTokens = pipeline.AddTokens(usage.PromptTokens, u.PromptTokens)
		usage.CompletionTokens = pipeline.AddTokens(usage.CompletionTokens, u.CompletionTokens)
		if err != nil {
			return pipeline.Decision{Usage: usage}, err
		}
		d, verr := s.parse(w, content)
		d.Usage = usage
		if verr == nil {
			return d, nil
		}
		lastInvalid = verr
		if s.cfg.OnInvalid != nil {
			s.cfg.OnInvalid(verr)
		}
		repair, err := prompts.RenderRepair(problemsOf(verr))
		if err != nil {
			return pipeline.Decision{Usage: usage}, err
		}
		msgs = append(msgs,
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content},
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: repair})
	}
	return pipeline.Decision{Usage: usage}, fmt.Errorf("supervisor %s: gave up after feeding the validation error back once: %w", s.cfg.Model, lastInvalid)
}

// parse decodes and validates the model's answer.
func (s *OpenAI) parse(w pipeline.Wall, content string) (pipeline.Decision, error) {
	var out modelOutput
	// The ingest boundary's strict decoder: one JSON object and nothing
	// after it, no field outside the schema, and no duplicate key, NUL or
	// invalid UTF-8 — which encoding/json would otherwise resolve silently
	// (the last of two "effect" keys wins, invalid bytes become U+FFFD),
	// settling on a reading of an ambiguous answer.
	if err := kernel.DecodeStrict("the answer", []byte(stripFence(content)), &out); err != nil {
		return pipeline.Decision{}, &InvalidOutputError{Problems: []string{fmt.Sprintf("the answer is not the JSON object of the response schema: %v", err)}}
	}
	d := pipeline.Decision{
		NeedsAttention: out.NeedsAttention,
		Causes:         out.Causes,
		Remedies:       out.Remedies,
		Lesson:         out.Lesson,
		Supervisor:     OpenAIName,
		Model:          s.cfg.Model,
		PromptVersion:  prompts.ReconcileVersion,
		Operations:     make([]pipeline.EffectAnswer, 0, len(out.Operations)),
	}
	for _, v := range out.Operations {
		d.Operations = append(d.Operations, pipeline.EffectAnswer{OperationID: v.OperationID, Effect: v.Effect, Basis: v.Basis, Note: v.Note})
	}
	if d.Causes == nil {
		d.Causes = []string{}
	}
	if d.Remedies == nil {
		d.Remedies = []string{}
	}
	if err := Validate(w, d); err != nil {
		return pipeline.Decision{}, err
	}
	return d, nil
}

// problemsOf lists what was wrong with an answer, for the repair message.
func problemsOf(err error) []string {
	var ie *InvalidOutputError
	if errors.As(err, &ie) {
		return ie.Problems
	}
	return []string{err.Error()}
}

// stripFence tolerates a model that wraps its JSON in a Markdown fence.
func stripFence(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```json")
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimSuffix(strings.TrimSpace(t), "```")
	}
	return t
}

// complete makes one chat completion, retrying 429, 5xx and network errors
// with capped backoff.
func (s *OpenAI) complete(ctx context.Context, msgs []openai.ChatCompletionMessage, schema *jsonschema.Definition) (string, pipeline.Usage, error) {
	req := openai.ChatCompletionRequest{
		Model:       s.cfg.Model,
		Messages:    msgs,
		Temperature: 0,
		ResponseFormat: &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:   "reckon_wall_verdict",
				Schema: schema,
				Strict: true,
			},
		},
	}
	var lastErr error
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		resp, err := s.client.CreateChatCompletion(actx, req)
		// go-openai has read the whole answer by now: the deadline can go.
		timedOut := err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if timedOut {
			err = fmt.Errorf("model call timed out after %s (OpenAIConfig.Timeout): %w", s.cfg.Timeout, err)
		}
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		if s.cfg.Observe != nil {
			s.cfg.Observe(time.Since(start), outcome)
		}
		if err == nil {
			if len(resp.Choices) == 0 {
				return "", pipeline.Usage{}, &InvalidOutputError{Problems: []string{"the response has no choices"}}
			}
			// The server's own count, never negative: a negative one
			// would buy a sweep more than its token budget.
			u := pipeline.Usage{PromptTokens: max(resp.Usage.PromptTokens, 0), CompletionTokens: max(resp.Usage.CompletionTokens, 0)}
			c := resp.Choices[0].Message
			if c.Refusal != "" {
				return c.Content, u, fmt.Errorf("supervisor %s refused: %s", s.cfg.Model, c.Refusal)
			}
			return c.Content, u, nil
		}
		if ctx.Err() != nil {
			return "", pipeline.Usage{}, fmt.Errorf("supervisor %s: %w", s.cfg.Model, ctx.Err())
		}
		status := statusOf(err)
		// An oversized answer would be as large again: not retried.
		retryable := (status == http.StatusTooManyRequests || status >= 500 || status == 0) && !errors.Is(err, errResponseTooLarge)
		lastErr = fmt.Errorf("supervisor %s: attempt %d/%d: %w", s.cfg.Model, attempt, s.cfg.MaxAttempts, err)
		if !retryable || attempt == s.cfg.MaxAttempts {
			break
		}
		wait := s.backoff(attempt)
		if ra, ok := retryAfter(resp.Header()); ok {
			wait = ra
		}
		if wait > s.cfg.MaxBackoff {
			wait = s.cfg.MaxBackoff
		}
		if err := s.cfg.Sleep(ctx, wait); err != nil {
			return "", pipeline.Usage{}, fmt.Errorf("supervisor %s: %w", s.cfg.Model, err)
		}
	}
	return "", pipeline.Usage{}, lastErr
}

func (s *OpenAI) backoff(attempt int) time.Duration {
	d := s.cfg.BaseBackoff << (attempt - 1)
	if d <= 0 || d > s.cfg.MaxBackoff {
		d = s.cfg.MaxBackoff
	}
	// Full jitter in [d/2, d): concurrent walls that hit one limit spread out.
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// statusOf returns the HTTP status of an API error, 0 for transport errors.
func statusOf(err error) int {
	var ae *openai.APIError
	if errors.As(err, &ae) {
		return ae.HTTPStatusCode
	}
	var re *openai.RequestError
	if errors.As(err, &re) {
		return re.HTTPStatusCode
	}
	return 0
}

// retryAfter reads Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := time.Until(t)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// DefaultMaxResponseBytes bounds a model's HTTP response: a wall's answer
// is at most 50 notes of 2000 bytes plus the conclusion, well under it.
const DefaultMaxResponseBytes = 4 << 20

// errResponseTooLarge is the read error of a response body past the bound.
var errResponseTooLarge = errors.New("response body exceeds the supervisor's size bound (OpenAIConfig.MaxResponseBytes)")

// limitTransport bounds every response body it returns to max bytes.
type limitTransport struct {
	base http.RoundTripper
	max  int64
}

// RoundTrip implements http.RoundTripper.
func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

// limitedBody fails with errResponseTooLarge once more than its bound is
// read, instead of a silent cut that would decode as a shorter answer.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errResponseTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
