package runner

import "github.com/seed-7bc021c3/reckon/kernel/plan"

// The plan's types and rules live in kernel/plan (light enough to fuzz);
// these aliases keep runner.Plan and friends, which the rest of reckon
// uses, one name for one thing.
type (
	// Plan is the input of a run (plan.Plan).
	Plan = plan.Plan
	// Step is one tool call of a plan (plan.Step).
	Step = plan.Step
	// ToolSet resolves tool names (plan.ToolSet).
	ToolSet = plan.ToolSet
	// Tools is a ToolSet of fixed tools (plan.Tools).
	Tools = plan.Tools
	// Chain looks tools up in several sets in order (plan.Chain).
	Chain = plan.Chain
)

// Plan limits and step values (see kernel/plan).
const (
	OnUncertainStop    = plan.OnUncertainStop
	OnUncertainReissue = plan.OnUncertainReissue
	OnUncertainAwait   = plan.OnUncertainAwait
	MaxSteps           = plan.MaxSteps
	MaxTotal           = plan.MaxTotal
	MaxDepth           = plan.MaxDepth
	MaxReissues        = plan.MaxReissues
	MaxPlanBytes       = plan.MaxPlanBytes
)

// DecodePlan decodes a plan strictly (plan.DecodePlan).
func DecodePlan(raw []byte) (Plan, error) { return plan.DecodePlan(raw) }

// NewTools indexes tools by their names (plan.NewTools).
var NewTools = plan.NewTools
