package app

import (
	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// OperationsService builds the operations projection and reconciliation
// service from the core's configuration (RECKON_OPERATIONS_WINDOW,
// RECKON_STALE_AFTER). tc answers liveness for the kernel's own runs
// (DescribeWorkflowExecution, cached briefly, a bounded number of calls per
// listing); with tc nil every run's liveness comes from the journal.
func (c *Core) OperationsService(tc client.Client) *operations.Service {
	c.opsOnce.Do(func() { c.OperationsMetrics.MustRegister(c.Registry) })
	o := operations.Config{Window: c.Cfg.OperationsWindow, StaleAfter: c.Cfg.StaleAfter, Metrics: c.OperationsMetrics}
	if tc != nil {
		o.Liveness = operations.NewTemporalLiveness(tc)
	}
	return operations.New(c.Pool, o)
}
