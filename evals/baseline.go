package evals

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// BaselineFile is the committed baseline of the built-in supervisor.
const BaselineFile = "baseline.json"

// Baseline is the recorded floor a supervisor must keep on a suite. The
// unsafe counts are not recorded: any unsafe verdict fails the gate.
type Baseline struct {
	Supervisor string `json:"supervisor"`
	// Accuracy is the floor of accuracy on decided operations.
	Accuracy float64 `json:"accuracy"`
	// Coverage is the floor of the share of operations decided; it keeps a
	// supervisor from buying accuracy by abstaining on everything.
	Coverage float64 `json:"coverage"`
	// ProofRecall is the floor of proof recall (decided among the
	// operations the wall's evidence could decide); absent from baselines
	// recorded before it, which then gate on accuracy and coverage alone.
	ProofRecall *float64  `json:"proof_recall,omitempty"`
	Walls       int       `json:"walls"`
	Operations  int       `json:"operations"`
	RecordedAt  time.Time `json:"recorded_at"`
	Command     string    `json:"command"`
}

// ReadBaseline reads a baseline file.
func ReadBaseline(path string) (*Baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read baseline: %w", err)
	}
	var bl Baseline
	if err := json.Unmarshal(b, &bl); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	// The floors must be there: a file without them (an empty object, a
	// report.json passed by mistake) would read as floors of 0 and pass
	// any supervisor. Other fields stay optional, as they were.
	var floors struct {
		Accuracy *float64 `json:"accuracy"`
		Coverage *float64 `json:"coverage"`
	}
	_ = json.Unmarshal(b, &floors)
	for _, f := range []struct {
		name string
		v    *float64
	}{{"accuracy", floors.Accuracy}, {"coverage", floors.Coverage}} {
		if f.v == nil {
			return nil, fmt.Errorf("baseline %s: field %q is missing: not a baseline file (reckon eval --write-baseline FILE records one)", path, f.name)
		}
	}
	if bl.Accuracy < 0 || bl.Accuracy > 1 || bl.Coverage < 0 || bl.Coverage > 1 || bl.ProofRecall != nil && (*bl.ProofRecall < 0 || *bl.ProofRecall > 1) {
		return nil, fmt.Errorf("baseline %s: accuracy, coverage and proof_recall must be within 0..1", path)
	}
	return &bl, nil
}

// NewBaseline records the report's figures as the new floor.
func NewBaseline(rep *Report, command string, now time.Time) (*Baseline, error) {
	if rep.Metrics.Accuracy == nil || rep.Metrics.Coverage == nil {
		return nil, errors.New("baseline: the supervisor decided nothing; there is no accuracy to record")
	}
	if err := rep.gateUnsafe(); err != nil {
		return nil, fmt.Errorf("baseline: refusing to record a run that fails the gate: %w", err)
	}
	return &Baseline{
		Supervisor: rep.Supervisor, Accuracy: *rep.Metrics.Accuracy, Coverage: *rep.Metrics.Coverage, ProofRecall: rep.Metrics.ProofRecall,
		Walls: rep.Metrics.Walls, Operations: rep.Metrics.Operations, RecordedAt: now.UTC(), Command: command,
	}, nil
}

// WriteBaseline writes bl to path.
func WriteBaseline(path string, bl *Baseline) error {
	b, err := json.MarshalIndent(bl, "", "  ")
	if err != nil {
		return fmt.Errorf("marshal baseline: %w", err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

func (rep *Report) gateUnsafe() error {
	m := rep.Metrics
	var ps []string
	if m.UnsafeNone > 0 {
		ps = append(ps, fmt.Sprintf("unsafe-none is %d (said none where the effect occurred)", m.UnsafeNone))
	}
	if m.UnsafeOccurred > 0 {
		ps = append(ps, fmt.Sprintf("unsafe-occurred is %d (said occurred where nothing happened)", m.UnsafeOccurred))
	}
	if m.InvalidOutputs > 0 || m.Errored > 0 {
		ps = append(ps, fmt.Sprintf("%d invalid outputs and %d errored cases", m.InvalidOutputs, m.Errored))
	}
	if len(ps) > 0 {
		return errors.New(strings.Join(ps, "; "))
	}
	return nil
}

// GateSettled fails when anything unsafe would be journaled: a settled
// unsafe-none or unsafe-occurred. It is the gate for supervisors that are
// expected to fail validation (hostile models: their walls stay unsettled,
// which is safe), where Gate's invalid-output and baseline checks do not
// apply.
func GateSettled(rep *Report) error {
	m := rep.Metrics
	if m.UnsafeNone > 0 || m.UnsafeOccurred > 0 {
		return fmt.Errorf("supervisor %s under settlement policy %s: %d unsafe-none and %d unsafe-occurred verdicts would be journaled",
			rep.Supervisor, rep.SettlePolicy, m.UnsafeNone, m.UnsafeOccurred)
	}
	return nil
}

// Gate fails when the report has any unsafe verdict, any invalid or
// errored case, or accuracy or coverage below the baseline. The error
// lists every reason.
func Gate(rep *Report, bl *Baseline) error {
	var ps []string
	if err := rep.gateUnsafe(); err != nil {
		ps = append(ps, err.Error())
	}
	m := rep.Metrics
	const eps = 1e-9
	switch {
	case m.Accuracy == nil:
		ps = append(ps, "accuracy is undefined: nothing was decided")
	case *m.Accuracy+eps < bl.Accuracy:
		ps = append(ps, fmt.Sprintf("accuracy on decided operations %.4f is below the baseline %.4f", *m.Accuracy, bl.Accuracy))
	}
	if m.Coverage == nil || *m.Coverage+eps < bl.Coverage {
		ps = append(ps, fmt.Sprintf("coverage %.4f is below the baseline %.4f", orZero(m.Coverage), bl.Coverage))
	}
	if bl.ProofRecall != nil && (m.ProofRecall == nil || *m.ProofRecall+eps < *bl.ProofRecall) {
		ps = append(ps, fmt.Sprintf("proof recall %.4f is below the baseline %.4f", orZero(m.ProofRecall), *bl.ProofRecall))
	}
	// Accuracy and coverage are ratios, so a floor says nothing about a
	// different suite: one without the walls a supervisor gets wrong would
	// pass it. Baselines that do not record their suite's size keep
	// gating on the ratios alone.
	if bl.Walls > 0 && (m.Walls != bl.Walls || m.Operations != bl.Operations) {
		ps = append(ps, fmt.Sprintf("the baseline was recorded on %d walls and %d operations, this run scored %d and %d: not the same suite (re-record the baseline with --write-baseline if the suite changed on purpose)",
			bl.Walls, bl.Operations, m.Walls, m.Operations))
	}
	if len(ps) > 0 {
		return fmt.Errorf("eval gate failed for supervisor %s: %s", rep.Supervisor, strings.Join(ps, "; "))
	}
	return nil
}

// orZero is *v, or 0 when undefined.
func orZero(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

// MinProofRecall is the proof recall the built-in supervisor must reach on
// the committed suite (TestRegressionGateBuiltin), with accuracy 100 % and
// no unsafe verdict, independent of the recorded baseline: it decides
// every operation whose wall's evidence the drill recorded as deciding
// it. Coverage is no such floor: the scenario mix sets its ceiling.
const MinProofRecall = 1.0
