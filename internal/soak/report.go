package soak

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Report is the soak's result, written as JSON beside the last line.
type Report struct {
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Seconds  float64   `json:"seconds"`
	// Settings the run used.
	Rounds         int     `json:"rounds_per_scenario"`
	TimeoutSeconds float64 `json:"timeout_seconds"`
	OutageSeconds  float64 `json:"outage_seconds"`
	HeartbeatS     float64 `json:"tool_heartbeat_timeout_seconds"`
	Sandbox        string  `json:"sandbox"` // bubblewrap | unconfined
	PostgreSQL     string  `json:"postgresql"`
	CPUs           int     `json:"cpus"`

	Totals    Totals      `json:"totals"`
	Scenarios []*Scenario `json:"scenarios"`
	// WorkerDeathToListed: from SIGKILL of the only worker to the operation
	// it was running showing in GET /v1/agent/operations.
	WorkerDeathToListed Distribution `json:"worker_death_to_listed"`
	// Problems is everything that went wrong, one line each; empty on a
	// passing soak.
	Problems []string `json:"problems"`
	// Aborted says why the soak stopped before its end (interrupt, the
	// time limit's grace); an aborted soak does not pass.
	Aborted string `json:"aborted,omitempty"`
	Passed  bool   `json:"passed"`
}

// Counts are the figures every scenario reports and the totals sum.
type Counts struct {
	Rounds            int   `json:"rounds"`
	Acknowledged      int64 `json:"acknowledged"`
	Lost              int64 `json:"lost"`
	Duplicated        int64 `json:"duplicated"`
	SpuriousConflicts int64 `json:"spurious_conflicts"`
	ReExecuted        int64 `json:"re_executed"`
}

// add adds c's figures to n's.
func (n *Counts) add(c Counts) {
	n.Rounds += c.Rounds
	n.Acknowledged += c.Acknowledged
	n.Lost += c.Lost
	n.Duplicated += c.Duplicated
	n.SpuriousConflicts += c.SpuriousConflicts
	n.ReExecuted += c.ReExecuted
}

// Totals are the figures of the last line, summed over the scenarios.
type Totals struct {
	Counts
	MaxRecoveryS float64 `json:"max_recovery_seconds"`
}

// Scenario is one scenario's figures.
type Scenario struct {
	Name string `json:"name"`
	// Proves says in one line what a pass shows.
	Proves string `json:"proves"`
	Counts
	Seconds float64 `json:"seconds"`
	// Recovery: per fault, from the fault to the service working again (the
	// scenario says what that means in RecoveryMeans).
	RecoveryMeans string         `json:"recovery_means,omitempty"`
	Recovery      Distribution   `json:"recovery"`
	Figures       map[string]any `json:"figures,omitempty"`
	Problems      []string       `json:"problems,omitempty"`
	// Skipped says why the scenario did not run (time limit, selection).
	Skipped string `json:"skipped,omitempty"`
}

// Distribution summarises durations in seconds.
type Distribution struct {
	Count   int       `json:"count"`
	P50     float64   `json:"p50_seconds"`
	P90     float64   `json:"p90_seconds"`
	Max     float64   `json:"max_seconds"`
	Samples []float64 `json:"samples_seconds"`
}

// add records one duration.
func (d *Distribution) add(v time.Duration) {
	d.Samples = append(d.Samples, math.Round(v.Seconds()*1000)/1000)
	s := append([]float64(nil), d.Samples...)
	sort.Float64s(s)
	d.Count = len(s)
	d.P50 = quantile(s, 0.5)
	d.P90 = quantile(s, 0.9)
	d.Max = s[len(s)-1]
}

// quantile of sorted values, nearest rank.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

// problem records a problem of the scenario.
func (s *Scenario) problem(format string, args ...any) {
	s.Problems = append(s.Problems, fmt.Sprintf(format, args...))
}

// figure records a scenario-specific figure.
func (s *Scenario) figure(name string, v any) {
	if s.Figures == nil {
		s.Figures = map[string]any{}
	}
	s.Figures[name] = v
}

// total sums the scenarios into Totals and Problems and decides Passed: a
// soak passes when nothing was lost, duplicated, spuriously conflicting or
// re-executed and no scenario failed to prove what it should.
func (r *Report) total() {
	t := Totals{}
	r.Problems = nil
	for _, s := range r.Scenarios {
		t.add(s.Counts)
		t.MaxRecoveryS = math.Max(t.MaxRecoveryS, s.Recovery.Max)
		for _, p := range s.Problems {
			r.Problems = append(r.Problems, s.Name+": "+p)
		}
	}
	r.Totals = t
	if r.Aborted != "" {
		r.Problems = append(r.Problems, r.Aborted)
	}
	r.Passed = t.Lost == 0 && t.Duplicated == 0 && t.SpuriousConflicts == 0 && t.ReExecuted == 0 && len(r.Problems) == 0
}

// LastLine is the soak's last line of output, in a fixed format scripts
// can match.
func (r *Report) LastLine() string {
	t := r.Totals
	return fmt.Sprintf("soak: rounds %d, acknowledged %d, lost %d, duplicated %d, spurious conflicts %d, re-executed %d, max recovery %.1f s",
		t.Rounds, t.Acknowledged, t.Lost, t.Duplicated, t.SpuriousConflicts, t.ReExecuted, t.MaxRecoveryS)
}
