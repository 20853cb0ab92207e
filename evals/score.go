package evals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// What a supervisor said about an operation, the columns of the confusion
// matrix. Invalid means no valid verdict: the decision failed validation or
// the supervisor errored on the wall.
const (
	SaidOccurred = "occurred"
	SaidNone     = "none"
	SaidUnknown  = "unknown"
	SaidInvalid  = "invalid"
)

// TruthValues and SaidValues are the rows and columns of the confusion
// matrix, in display order.
var (
	TruthValues = []string{TruthOccurred, TruthNone}
	SaidValues  = []string{SaidOccurred, SaidNone, SaidUnknown, SaidInvalid}
)

// Case statuses.
const (
	StatusOK      = "ok"      // a valid decision was scored
	StatusInvalid = "invalid" // the decision failed validation
	StatusError   = "error"   // Decide returned an error, panicked or timed out
)

// Unsafe kinds of a wrong decided verdict.
const (
	UnsafeNone     = "unsafe_none"     // said none, truth occurred: a re-issue duplicates the effect
	UnsafeOccurred = "unsafe_occurred" // said occurred, truth none: the work is silently dropped
)

// ScoreParams tune one scoring run (a call's parameters). The zero value runs sequentially on the wall
// clock under the default settlement policy. Decisions are checked with
// supervisor.Validate and settled with supervisor.Settle, the sweep's own
// code, so a decision the sweep would reject is invalid and the verdicts
// scored are the ones a sweep would journal.
type ScoreParams struct {
	// Policy is the settlement policy (RECKON_SUPERVISOR_SETTLE); empty
	// means supervisor.DefaultSettlePolicy.
	Policy string
	// CaseTimeout bounds one Decide call; zero means no bound.
	CaseTimeout time.Duration
	// Concurrency is how many walls are decided at once (default 1).
	Concurrency int
	// Now is the clock used to measure latency; nil means time.Now.
	Now func() time.Time
	// Progress, when set, is called after each case (serialised).
	Progress func(done, total int, c CaseResult)
}

// OperationResult is the verdict on one operation next to its truth.
type OperationResult struct {
	OperationID string `json:"operation_id"`
	Tool        string `json:"tool"`
	Truth       string `json:"truth"`
	// Said is the effect that would be journaled: the supervisor's, after
	// the settlement policy.
	Said  string `json:"said"`
	Basis string `json:"basis,omitempty"`
	Note  string `json:"note,omitempty"`
	// Correct is true when a decided verdict matches the truth.
	Correct bool `json:"correct"`
	// NeedsPerson is the fixture's record that the wall's evidence could
	// not decide the operation (Fixture.PersonNeeded): unknown is then the
	// right answer; otherwise a proof was on the wall.
	NeedsPerson bool `json:"needs_person"`
	// Unsafe names the kind of a wrong decided verdict.
	Unsafe string `json:"unsafe,omitempty"`
	// Proposed is the effect the supervisor itself gave when the
	// settlement policy held it back (Said is then unknown); empty when it
	// settled as given. Absent from reports written before the policy.
	Proposed string `json:"proposed,omitempty"`
	// ProposedUnsafe names the kind of harm the supervisor's own effect
	// would have done had it settled (set whether or not it did), so a
	// model's quality stays visible behind the policy.
	ProposedUnsafe string `json:"proposed_unsafe,omitempty"`
}

// ProposedEffect is what the supervisor itself said about the operation:
// its proposal when settlement held it back, otherwise what was recorded.
func (r OperationResult) ProposedEffect() string {
	if r.Proposed != "" {
		return r.Proposed
	}
	return r.Said
}

// CaseResult is the outcome of one fixture.
type CaseResult struct {
	ID                   string `json:"id"`
	Scenario             string `json:"scenario"`
	Status               string `json:"status"`
	Error                string `json:"error,omitempty"`
	ExpectNeedsAttention bool   `json:"expect_needs_attention"`
	// NeedsAttention is the supervisor's flag; nil without a valid decision.
	NeedsAttention *bool             `json:"needs_attention"`
	Causes         []string          `json:"causes,omitempty"`
	LatencyMS      float64           `json:"latency_ms"`
	Usage          pipeline.Usage    `json:"usage"`
	Model          string            `json:"model,omitempty"`
	PromptVersion  string            `json:"prompt_version,omitempty"`
	Operations     []OperationResult `json:"operations"`
}

// Confusion counts operations by truth (rows) and what was said (columns).
type Confusion map[string]map[string]int

// NewConfusion returns a matrix with every cell present and zero.
func NewConfusion() Confusion {
	c := Confusion{}
	for _, t := range TruthValues {
		c[t] = map[string]int{}
		for _, s := range SaidValues {
			c[t][s] = 0
		}
	}
	return c
}

// AttentionScore compares needs_attention with the fixtures' expectation,
// over walls with a valid decision.
type AttentionScore struct {
	TruePositives  int `json:"true_positives"`
	FalsePositives int `json:"false_positives"`
	FalseNegatives int `json:"false_negatives"`
	TrueNegatives  int `json:"true_negatives"`
	// Precision is TP/(TP+FP); nil when the supervisor never raised it.
	Precision *float64 `json:"precision"`
	// Recall is TP/(TP+FN); nil when no wall expected it.
	Recall *float64 `json:"recall"`
}

// Latency summarises Decide wall-clock time per case, in milliseconds.
type Latency struct {
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P95MS  float64 `json:"p95_ms"`
	MaxMS  float64 `json:"max_ms"`
}

// Metrics is the scorecard of a set of cases.
type Metrics struct {
	Walls          int `json:"walls"`
	WallsOK        int `json:"walls_ok"`
	InvalidOutputs int `json:"invalid_outputs"`
	Errored        int `json:"errored"`

	Operations    int `json:"operations"`
	TruthOccurred int `json:"truth_occurred"`
	TruthNone     int `json:"truth_none"`
	// Decided counts valid verdicts other than unknown.
	Decided int `json:"decided"`
	Correct int `json:"correct"`
	Unknown int `json:"unknown"`
	// Invalid counts operations without a valid verdict.
	Invalid int `json:"invalid"`

	// Accuracy is Correct/Decided; nil when nothing was decided.
	Accuracy *float64 `json:"accuracy"`
	// Coverage is Decided/Operations.
	Coverage *float64 `json:"coverage"`

	// Provable counts operations the wall's evidence could decide (a
	// probe finding or a kernel fact proves their truth, as the fixture
	// records), and ProvableDecided those of them the supervisor decided.
	Provable        int `json:"provable"`
	ProvableDecided int `json:"provable_decided"`
	// ProofRecall is ProvableDecided/Provable: of what could be proved,
	// the share decided. Coverage counts every operation, so a suite of
	// unprovable ones caps it; proof recall does not.
	ProofRecall *float64 `json:"proof_recall"`
	// UnknownWithProof counts unknown where a proof existed (a miss);
	// Abstained, unknown where a person was needed (the right answer);
	// DecidedWithoutProof, a verdict where a person was needed (a guess,
	// right or not).
	UnknownWithProof    int `json:"unknown_with_proof"`
	Abstained           int `json:"abstained"`
	DecidedWithoutProof int `json:"decided_without_proof"`

	// UnsafeNone and UnsafeOccurred count what would be journaled, under
	// the report's settlement policy: the harm a sweep would do.
	UnsafeNone     int `json:"unsafe_none"`
	UnsafeOccurred int `json:"unsafe_occurred"`
	// ProposedUnsafeNone and ProposedUnsafeOccurred count the same on what
	// the supervisor proposed before the settlement policy: the model's own
	// quality, which the policy keeps from doing harm.
	ProposedUnsafeNone     int `json:"proposed_unsafe_none"`
	ProposedUnsafeOccurred int `json:"proposed_unsafe_occurred"`
	// Held counts occurred/none proposals the policy recorded as unknown.
	Held int `json:"held"`
	// UnsafeNoneRate is UnsafeNone/TruthOccurred: of the effects that truly
	// landed, the share declared not to have happened.
	UnsafeNoneRate *float64 `json:"unsafe_none_rate"`
	// UnsafeOccurredRate is UnsafeOccurred/TruthNone: of the effects that
	// never happened, the share declared done.
	UnsafeOccurredRate *float64 `json:"unsafe_occurred_rate"`

	NeedsAttention AttentionScore `json:"needs_attention"`
	Usage          pipeline.Usage `json:"usage"`
	Latency        Latency        `json:"latency"`
	Confusion      Confusion      `json:"confusion"`
}

// ScenarioMetrics is the scorecard restricted to one scenario kind.
type ScenarioMetrics struct {
	Scenario string  `json:"scenario"`
	Metrics  Metrics `json:"metrics"`
}

// ReportVersion is the version of report.json's layout.
const ReportVersion = 1

// Report is everything one scoring run produced.
type Report struct {
	Version    int    `json:"version"`
	Supervisor string `json:"supervisor"`
	// SettlePolicy is the settlement policy the verdicts were scored under;
	// absent from reports written before the policy (inference, in effect).
	SettlePolicy  string    `json:"settle_policy,omitempty"`
	Model         string    `json:"model,omitempty"`
	PromptVersion string    `json:"prompt_version,omitempty"`
	Fixtures      string    `json:"fixtures"`
	Suite         *Manifest `json:"suite,omitempty"`
	// ModelInvalidAnswers counts every model answer that failed validation,
	// including those its repair round then fixed (set by the caller from
	// the supervisor's OnInvalid hook; zero for the built-in supervisor).
	ModelInvalidAnswers int               `json:"model_invalid_answers"`
	StartedAt           time.Time         `json:"started_at"`
	DurationMS          float64           `json:"duration_ms"`
	Metrics             Metrics           `json:"metrics"`
	Scenarios           []ScenarioMetrics `json:"scenarios"`
	Cases               []CaseResult      `json:"cases"`
}

// Score runs sup on every fixture's wall and scores the verdicts. A case
// that errors, panics, times out or returns an invalid decision is recorded
// as failed and the run goes on; Score itself fails only when ctx ends.
func Score(ctx context.Context, sup pipeline.Supervisor, fixtures []*Fixture, opt ScoreParams) (*Report, error) {
	if len(fixtures) == 0 {
		return nil, ErrNoFixtures
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Concurrency < 1 {
		opt.Concurrency = 1
	}
	policy, err := supervisor.ParseSettlePolicy(opt.Policy)
	if err != nil {
		return nil, fmt.Errorf("settlement policy: %w", err)
	}
	opt.Policy = policy
	start := opt.Now()
	rep := &Report{Version: ReportVersion, Supervisor: sup.Name(), SettlePolicy: policy, StartedAt: start.UTC()}
	cases := make([]CaseResult, len(fixtures))

	var mu sync.Mutex
	done := 0
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < opt.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				c := runCase(ctx, sup, fixtures[i], opt)
				mu.Lock()
				cases[i] = c
				done++
				if opt.Progress != nil {
					opt.Progress(done, len(fixtures), c)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range fixtures {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("eval interrupted after %d of %d cases: %w", done, len(fixtures), err)
	}

	rep.DurationMS = ms(opt.Now().Sub(start))
	rep.Cases = cases
	for _, c := range cases {
		// Only a returned decision sets a case's model and prompt version.
		if rep.Model == "" && (c.Model != "" || c.PromptVersion != "") {
			rep.Model, rep.PromptVersion = c.Model, c.PromptVersion
		}
	}
	rep.Metrics = Compute(cases)
	byScenario := map[string][]CaseResult{}
	for _, c := range cases {
		byScenario[c.Scenario] = append(byScenario[c.Scenario], c)
	}
	names := make([]string, 0, len(byScenario))
	for n := range byScenario {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		rep.Scenarios = append(rep.Scenarios, ScenarioMetrics{Scenario: n, Metrics: Compute(byScenario[n])})
	}
	return rep, nil
}

// runCase decides one wall and scores it against the truth.
func runCase(ctx context.Context, sup pipeline.Supervisor, f *Fixture, opt ScoreParams) CaseResult {
	c := CaseResult{ID: f.ID, Scenario: f.Scenario, ExpectNeedsAttention: f.ExpectNeedsAttention}
	cctx := ctx
	if opt.CaseTimeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, opt.CaseTimeout)
		defer cancel()
	}
	t0 := opt.Now()
	d, err := decideBounded(cctx, sup, wallCopy(f.Wall))
	c.LatencyMS = ms(opt.Now().Sub(t0))
	if err == nil && opt.CaseTimeout > 0 && cctx.Err() != nil {
		err = fmt.Errorf("decide: %w", cctx.Err())
	}
	invalid := func() {
		for _, op := range f.Wall.Operations {
			c.Operations = append(c.Operations, OperationResult{
				OperationID: op.OperationID, Tool: op.Tool, Truth: f.Truth[op.OperationID], Said: SaidInvalid,
				NeedsPerson: f.PersonNeeded(op.OperationID),
			})
		}
	}
	if err != nil {
		// A supervisor that gave up because its answers kept failing
		// validation produced invalid output; anything else is an error.
		c.Status, c.Error = StatusError, err.Error()
		var ioe *supervisor.InvalidOutputError
		if errors.As(err, &ioe) {
			c.Status = StatusInvalid
		}
		c.Usage = d.Usage
		invalid()
		return c
	}
	c.Usage, c.Model, c.PromptVersion = d.Usage, d.Model, d.PromptVersion
	if err := supervisor.Validate(f.Wall, d); err != nil {
		c.Status, c.Error = StatusInvalid, err.Error()
		invalid()
		return c
	}
	c.Status = StatusOK
	// Score what a sweep would journal: the decision under the policy.
	d = supervisor.Settle(opt.Policy, f.Wall, d)
	na := d.NeedsAttention
	c.NeedsAttention = &na
	c.Causes = d.Causes
	verdicts := make(map[string]pipeline.EffectAnswer, len(d.Operations))
	for _, v := range d.Operations {
		verdicts[v.OperationID] = v
	}
	for _, op := range f.Wall.Operations {
		v := verdicts[op.OperationID]
		r := OperationResult{
			OperationID: op.OperationID, Tool: op.Tool, Truth: f.Truth[op.OperationID],
			Said: v.Effect, Basis: v.Basis, Note: v.Note, Proposed: v.ProposedEffect,
			NeedsPerson: f.PersonNeeded(op.OperationID),
		}
		if v.Effect != kernel.EffectUnknown {
			r.Correct = v.Effect == r.Truth
		}
		r.Unsafe = unsafeKind(v.Effect, r.Truth)
		r.ProposedUnsafe = unsafeKind(r.ProposedEffect(), r.Truth)
		c.Operations = append(c.Operations, r)
	}
	return c
}

// unsafeKind names the harm of saying effect when truth holds, "" for none.
func unsafeKind(effect, truth string) string {
	switch {
	case effect == SaidNone && truth == TruthOccurred:
		return UnsafeNone
	case effect == SaidOccurred && truth == TruthNone:
		return UnsafeOccurred
	}
	return ""
}

// wallCopy returns a deep copy of w for the supervisor. Decide takes the
// wall by value, but its operations, evidence and args share memory with
// the fixture: a supervisor that wrote to them (a probe finding added to
// back its own answer) would be validated and settled against the wall it
// forged, and would change the fixture for every later case and every
// supervisor scored after it. A wall that does not survive a JSON round
// trip (it came from JSON) is handed over as it is.
func wallCopy(w pipeline.Wall) pipeline.Wall {
	b, err := json.Marshal(w)
	if err != nil {
		return w
	}
	var c pipeline.Wall
	if err := json.Unmarshal(b, &c); err != nil {
		return w
	}
	return c
}

// decideBounded is safeDecide that stops waiting once ctx ends (the case's
// timeout, or the whole run's): a supervisor that ignores its context
// would otherwise hold Score, and its --concurrency slot, for ever. Its
// call is abandoned, not stopped: the goroutine ends when Decide returns,
// and since it decides on a copy of the wall (wallCopy), nothing it writes
// then reaches the fixture.
func decideBounded(ctx context.Context, sup pipeline.Supervisor, w pipeline.Wall) (pipeline.Decision, error) {
	type result struct {
		d   pipeline.Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := safeDecide(ctx, sup, w)
		done <- result{d, err}
	}()
	select {
	case r := <-done:
		return r.d, r.err
	case <-ctx.Done():
		return pipeline.Decision{}, fmt.Errorf("decide: %w (the supervisor did not return when its context ended; the call was abandoned)", ctx.Err())
	}
}

// safeDecide turns a panicking supervisor into an errored case.
func safeDecide(ctx context.Context, sup pipeline.Supervisor, w pipeline.Wall) (d pipeline.Decision, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decide panicked: %v", r)
		}
	}()
	d, err = sup.Decide(ctx, w)
	if err != nil {
		return d, fmt.Errorf("decide: %w", err)
	}
	return d, nil
}

// Compute derives the scorecard from case results.
func Compute(cases []CaseResult) Metrics {
	m := Metrics{Confusion: NewConfusion()}
	var lat []float64
	for _, c := range cases {
		m.Walls++
		lat = append(lat, c.LatencyMS)
		m.Usage.PromptTokens += c.Usage.PromptTokens
		m.Usage.CompletionTokens += c.Usage.CompletionTokens
		switch c.Status {
		case StatusOK:
			m.WallsOK++
		case StatusInvalid:
			m.InvalidOutputs++
		case StatusError:
			m.Errored++
		}
		if c.NeedsAttention != nil {
			switch said, want := *c.NeedsAttention, c.ExpectNeedsAttention; {
			case said && want:
				m.NeedsAttention.TruePositives++
			case said && !want:
				m.NeedsAttention.FalsePositives++
			case !said && want:
				m.NeedsAttention.FalseNegatives++
			default:
				m.NeedsAttention.TrueNegatives++
			}
		}
		for _, op := range c.Operations {
			m.Operations++
			m.countProof(op)
			switch op.Truth {
			case TruthOccurred:
				m.TruthOccurred++
			case TruthNone:
				m.TruthNone++
			}
			if row, ok := m.Confusion[op.Truth]; ok {
				row[op.Said]++
			}
			switch op.Said {
			case SaidInvalid:
				m.Invalid++
			case SaidUnknown:
				m.Unknown++
			default:
				m.Decided++
				if op.Correct {
					m.Correct++
				}
			}
			switch op.Unsafe {
			case UnsafeNone:
				m.UnsafeNone++
			case UnsafeOccurred:
				m.UnsafeOccurred++
			}
			// Reports from before the policy carry no proposed_unsafe: what
			// was said is then what was proposed.
			proposed := op.ProposedUnsafe
			if op.Proposed == "" && proposed == "" {
				proposed = op.Unsafe
			}
			switch proposed {
			case UnsafeNone:
				m.ProposedUnsafeNone++
			case UnsafeOccurred:
				m.ProposedUnsafeOccurred++
			}
			if op.Proposed != "" {
				m.Held++
			}
		}
	}
	m.Accuracy = ratio(m.Correct, m.Decided)
	m.Coverage = ratio(m.Decided, m.Operations)
	m.ProofRecall = ratio(m.ProvableDecided, m.Provable)
	m.UnsafeNoneRate = ratio(m.UnsafeNone, m.TruthOccurred)
	m.UnsafeOccurredRate = ratio(m.UnsafeOccurred, m.TruthNone)
	na := &m.NeedsAttention
	na.Precision = ratio(na.TruePositives, na.TruePositives+na.FalsePositives)
	na.Recall = ratio(na.TruePositives, na.TruePositives+na.FalseNegatives)
	m.Latency = summarise(lat)
	return m
}

// countProof counts op against what its wall's evidence could decide.
func (m *Metrics) countProof(op OperationResult) {
	decided := op.Said != SaidUnknown && op.Said != SaidInvalid
	switch {
	case !op.NeedsPerson:
		m.Provable++
		if decided {
			m.ProvableDecided++
		} else if op.Said == SaidUnknown {
			m.UnknownWithProof++
		}
	case op.Said == SaidUnknown:
		m.Abstained++
	case decided:
		m.DecidedWithoutProof++
	}
}

// ratio returns n/d, or nil when d is zero (undefined, not zero).
func ratio(n, d int) *float64 {
	if d == 0 {
		return nil
	}
	v := float64(n) / float64(d)
	return &v
}

func summarise(lat []float64) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	s := append([]float64(nil), lat...)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Latency{
		MeanMS: round3(sum / float64(len(s))),
		P50MS:  round3(percentile(s, 0.50)),
		P95MS:  round3(percentile(s, 0.95)),
		MaxMS:  round3(s[len(s)-1]),
	}
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// ErrNoFixtures is returned when a scoring run is asked to score nothing.
var ErrNoFixtures = errors.New("no fixtures to score")
