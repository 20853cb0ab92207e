package httpapi

import (
	"context"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
)

// The services behind the routes: what the API needs of each domain
// package, declared here, where it is used. The domain packages implement
// them and know nothing of HTTP. (Ingest uses kernel.Journal and
// kernel.RunOwners, the kernel's own interfaces.)

// RunService starts runs from plans and shows them (*runner.Starter).
type RunService interface {
	Start(ctx context.Context, p runner.StartParams) (runID string, created bool, err error)
	View(ctx context.Context, project, runID string, page runner.EventPage) (runner.RunView, error)
}

// OperationService is the operations projection and the reconcile path
// (*operations.Service).
type OperationService interface {
	List(ctx context.Context, p operations.ListParams) (operations.Page, error)
	Attention(ctx context.Context, p operations.AttentionParams) (operations.AttentionPage, error)
	History(ctx context.Context, project, runID, operationID string) ([]kernel.Event, error)
	Reconcile(ctx context.Context, p operations.ReconcileParams) (operations.Recorded, error)
	KnownProjects(ctx context.Context, p operations.ProjectsParams) (operations.ProjectsPage, error)
	// Runs, RunSummary and RunOperations are the runs index and a run's
	// operations in every state.
	Runs(ctx context.Context, p operations.RunsParams) (operations.RunsPage, error)
	RunSummary(ctx context.Context, project, runID string) (*operations.RunSummary, error)
	RunOperations(ctx context.Context, p operations.RunOperationsParams) (operations.RunOperationsPage, error)
	// Guard is the retry guard: may a call with this effect key run?
	Guard(ctx context.Context, p operations.GuardParams) (operations.GuardAnswer, error)
}

// VerdictService reads the supervisor's verdicts and what operators have
// ruled since (*operations.Service).
type VerdictService interface {
	Verdicts(ctx context.Context, p operations.VerdictParams) (operations.VerdictPage, error)
}

var (
	_ RunService       = (*runner.Starter)(nil)
	_ OperationService = (*operations.Service)(nil)
	_ VerdictService   = (*operations.Service)(nil)
)
