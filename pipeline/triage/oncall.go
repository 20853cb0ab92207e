package triage

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// The gauges an on-call person is paged on (docs/production.md#alerts-and-dashboard).
// None is read from the database when Prometheus scrapes: the pipeline
// refreshes them.
//
//   - reckon_operations_unresolved{project,state}: at the end of every
//     scheduled sweep, from the listing the sweep made anyway, minus what
//     it settled. The state of an operation (crash_window against
//     stale_in_flight) needs its run's liveness from Temporal, a budgeted
//     call per run: the sweep pays for it once per schedule, a scrape
//     every few seconds would pay for it again and again.
//   - reckon_attention_operations, reckon_attention_oldest_age_seconds
//     and reckon_runs_awaiting, by project: after every scheduled sweep
//     and when the schedule starts, from operations.Backlog, one indexed
//     statement. They lag an operator's ruling by at most one schedule
//     period (5 minutes by default), which an alert that waits an hour
//     does not notice; the age is computed at scrape time from the oldest
//     decision's time, so it grows between refreshes as the wait does.
//   - reckon_triage_last_success_timestamp_seconds and
//     reckon_triage_sweeps_total{outcome}: at the end of every scheduled
//     sweep.

// newOncall builds the on-call collectors (NewMetrics registers them).
func (m *Metrics) newOncall() {
	m.unresolved = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reckon_operations_unresolved",
		Help: "Unresolved operations by project and state (crash_window, stale_in_flight, failed_uncertain) at the end of the last scheduled sweep: what it listed minus what it settled.",
	}, []string{"project", "state"})
	m.lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reckon_triage_last_success_timestamp_seconds",
		Help: "Unix time at which the last successful scheduled sweep ended (every wall journaled or left for later, none failed, no listing degraded); absent until one has.",
	}, nil)
	m.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reckon_triage_sweeps_total",
		Help: "Scheduled sweeps by outcome: ok, walls_failed (a supervisor or a write failed for some wall), degraded (Temporal did not answer for some run) or error (the sweep could not run).",
	}, []string{"outcome"})
	for _, o := range []string{sweepOK, sweepWallsFailed, sweepDegraded, sweepError} {
		m.outcomes.WithLabelValues(o)
	}
	m.backlog = &backlogCollector{
		attention: prometheus.NewDesc("reckon_attention_operations", "Operations in the operator's queue, by project, as of the pipeline's last refresh.", []string{"project"}, nil),
		age:       prometheus.NewDesc("reckon_attention_oldest_age_seconds", "Age of the oldest decision in the operator's queue, by project: now minus its time as of the pipeline's last refresh.", []string{"project"}, nil),
		awaiting:  prometheus.NewDesc("reckon_runs_awaiting", "Kernel runs awaiting the settlement of an operation (run.awaiting without run.resumed or an end), by project, as of the pipeline's last refresh.", []string{"project"}, nil),
		now:       time.Now,
	}
}

// Outcomes of a scheduled sweep (reckon_triage_sweeps_total).
const (
	sweepOK          = "ok"
	sweepWallsFailed = "walls_failed"
	sweepDegraded    = "degraded"
	sweepError       = "error"
)

// listedOp is one unresolved operation a sweep's listing returned.
type listedOp struct {
	project, runID, operationID, state string
}

// observeSweep records a scheduled sweep: its outcome, the time of its end
// when it succeeded, and the unresolved operations it leaves: listed,
// minus those a wall of it journaled.
func (m *Metrics) observeSweep(rep Report, err error, end time.Time) {
	outcome := sweepOK
	switch {
	case err != nil:
		outcome = sweepError
	case rep.Failed > 0:
		outcome = sweepWallsFailed
	case rep.Degraded:
		outcome = sweepDegraded
	}
	m.outcomes.WithLabelValues(outcome).Inc()
	if outcome == sweepOK {
		m.lastSuccess.WithLabelValues().Set(float64(end.UnixNano()) / 1e9)
	}
	if err != nil {
		return
	}
	settled := map[listedOp]bool{}
	for _, w := range rep.Walls {
		for _, ev := range w.Reconciled {
			settled[listedOp{project: ev.Project, runID: ev.RunID, operationID: ev.OperationID()}] = true
		}
	}
	counts := map[[2]string]int{}
	for _, op := range rep.listed {
		if !settled[listedOp{project: op.project, runID: op.runID, operationID: op.operationID}] {
			counts[[2]string{op.project, op.state}]++
		}
	}
	m.unresolved.Reset()
	for k, n := range counts {
		m.unresolved.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}

// RefreshBacklog reads what waits for people (operations.Backlog) into
// the attention and awaiting gauges. On an error the gauges keep their
// last values.
func (s *Sweeper) RefreshBacklog(ctx context.Context) error {
	b, err := s.ops.Backlog(ctx)
	if err != nil {
		return err
	}
	s.cfg.Metrics.backlog.set(b, s.cfg.Now)
	return nil
}

// backlogCollector serves the last refresh's backlog, the age of each
// project's oldest decision computed at scrape time.
type backlogCollector struct {
	attention, age, awaiting *prometheus.Desc

	mu       sync.Mutex
	projects []operations.ProjectBacklog
	now      func() time.Time
}

func (c *backlogCollector) set(b []operations.ProjectBacklog, now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.projects, c.now = b, now
}

// Describe implements prometheus.Collector.
func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.attention
	ch <- c.age
	ch <- c.awaiting
}

// Collect implements prometheus.Collector.
func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, p := range c.projects {
		age := 0.0
		if p.Attention > 0 {
			age = max(0, now.Sub(p.OldestAttention).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(c.attention, prometheus.GaugeValue, float64(p.Attention), p.Project)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, p.Project)
		ch <- prometheus.MustNewConstMetric(c.awaiting, prometheus.GaugeValue, float64(p.AwaitingRuns), p.Project)
	}
}
