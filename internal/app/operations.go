package app

import (
	"go.temporal.io/sdk/client"

	"github.com/seed-7bc021c3/reckon/kernel/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
)

// OperationsService builds the operations projection and reconciliation
// service from the core's configuration (RECKON_OPERATIONS_WINDOW,
// RECKON_STALE_AFTER). tc answers liveness for the kernel's own runs
// (DescribeWorkflowExecution, cached briefly, a bounded number of calls per
// listing); with tc nil every run's liveness comes from the journal.
func (c *Core) OperationsService(tc client.Client) *operations.Service {
	o := operations.Options{Window: c.Cfg.OperationsWindow, StaleAfter: c.Cfg.StaleAfter, Metrics: c.Ops}
	if tc != nil {
		o.Liveness = operations.NewTemporalLiveness(tc)
	}
	return operations.New(c.Pool, o)
}

// MountOperations builds the service and serves GET /v1/agent/operations,
// POST /v1/agent/operations/reconcile and GET /v1/agent/operations/history
// on api. Hand the returned service to StartPipeline too, so that the sweep
// lists with the same liveness and human and supervisor verdicts take the
// same code path.
func (c *Core) MountOperations(api *httpapi.Server, tc client.Client) *operations.Service {
	svc := c.OperationsService(tc)
	svc.Mount(api)
	return svc
}
