// Package drill generates and runs drill scenarios: real runs on the
// embedded stack with faults injected at known points, recorded as eval
// fixtures (the wall the sweep builds plus the ground truth of every
// operation, taken from the fault injector's record).
package drill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Scenario kinds. Each names one shape of run and where its fault fires.
const (
	KindCmdWriteAfterPost  = "cmd_write_after_post"  // file write, fault after the effect, postcondition declared
	KindCmdWriteAfterBare  = "cmd_write_after_bare"  // file write, fault after the effect, nothing declared
	KindCmdAppendAfter     = "cmd_append_after"      // append to a log file, fault after the effect
	KindCmdMkdirAfter      = "cmd_mkdir_after"       // mkdir, fault after the effect (a directory is no provable postcondition)
	KindCmdWriteBeforePost = "cmd_write_before_post" // file write, fault before the effect, postcondition declared
	KindCmdWriteBeforeBare = "cmd_write_before_bare" // file write, fault before the effect, nothing declared
	KindMCPIssueAfter      = "mcp_issue_after"       // create_issue on the test MCP server, fault after the effect
	KindMCPIssueBefore     = "mcp_issue_before"      // create_issue, fault before the effect
	KindFSWriteAfter       = "fs_write_after"        // filesystem-server write_file, fault after the effect
	KindFSWriteBefore      = "fs_write_before"       // filesystem-server write_file, fault before the effect
	KindDelegateUnsettled  = "delegate_unsettled"    // child run's operation uncertain: the delegation is uncertain too
	KindDelegateSettled    = "delegate_settled"      // as above, then the child's operation is reconciled by an operator
	KindMultiReissue       = "multi_reissue"         // several uncertain operations in one run, each re-issued
	KindClaimsSuccess      = "claims_success"        // agent text claims success; the effect never happened
	KindClaimsNothing      = "claims_nothing"        // agent text claims nothing was done; the effect landed
	KindCmdCrashWindow     = "cmd_crash_window"      // workflow and worker lost while run_command runs, before or after its effect: no terminal event
	KindCmdMkdirBefore     = "cmd_mkdir_before"      // mkdir, fault before the effect
	KindCmdRemoveAfter     = "cmd_rm_after"          // a bare command removes a file an earlier step wrote, fault after the effect
	KindCmdAppendBefore    = "cmd_append_before"     // append to a file an earlier step wrote, fault before the effect
	KindCmdPartialWrite    = "cmd_partial_write"     // a command writes two files and is lost after the first: the truth is occurred
	KindReissueNewFile     = "reissue_new_file"      // re-issued command whose every execution writes a different file
	KindMemoryAfter        = "memory_after"          // server-memory create_entities/add_observations/create_relations, fault after the effect
	KindMemoryBefore       = "memory_before"         // the same, fault before the effect

	// Kinds outside the probe-friendly set: no probe can decide them, or
	// only one that measures its preconditions right.
	KindMCPNoLookup       = "mcp_no_lookup"       // create_issue on an MCP server with no lookup_operation and no probe contract
	KindAgentRun          = "agent_run"           // an external agent's own run, reported through the ingest path: its call and its failure are its claims
	KindCmdTimeoutRunning = "cmd_timeout_running" // an unconfined command leaves a process behind: the call times out while it keeps running
	KindClockSkew         = "clock_skew"          // create_issue swept with the sweeper's clock 8 minutes ahead of the database's
	KindSharedStore       = "shared_store"        // server-memory write to a store shared with another agent, which writes the same entity
)

// Kinds lists every scenario kind in a fixed order.
var Kinds = []string{
	KindCmdWriteAfterPost, KindCmdWriteAfterBare, KindCmdAppendAfter, KindCmdMkdirAfter,
	KindCmdWriteBeforePost, KindCmdWriteBeforeBare, KindMCPIssueAfter, KindMCPIssueBefore,
	KindFSWriteAfter, KindFSWriteBefore, KindDelegateUnsettled, KindDelegateSettled,
	KindMultiReissue, KindClaimsSuccess, KindClaimsNothing, KindCmdCrashWindow,
	KindCmdMkdirBefore, KindCmdRemoveAfter, KindCmdAppendBefore, KindCmdPartialWrite, KindReissueNewFile,
	KindMemoryAfter, KindMemoryBefore,
	KindMCPNoLookup, KindAgentRun, KindCmdTimeoutRunning, KindClockSkew, KindSharedStore,
	KindKernelAgentCmd, KindKernelAgentMCP, KindKernelAgentResumed,
}

// Servers of the drill stack a plan may name in its tools
// (mcp__<server>__<tool>): a server the kind needs beside the defaults.
const (
	// NotesServer is reckon's test MCP server without lookup_operation.
	NotesServer = "notes"
	// SharedMemoryServer is server-memory over a store other agents write
	// too: not declared exclusive.
	SharedMemoryServer = "shared"
)

// SkewedSweep is how far ahead of the database's clock the sweeper's runs
// in a clock_skew drill, and EarlySweep how long after the run its first
// sweep comes: a probe that measured across the two clocks would take the
// call for 9 minutes old.
const (
	SkewedSweep = 8 * time.Minute
	EarlySweep  = 70 * time.Second
)

// Plan is a run's plan, in the format docs/design.md describes.
type Plan struct {
	Steps []Step `json:"steps"`
}

// Step is one tool call of a plan.
type Step struct {
	Tool          string         `json:"tool"`
	Args          map[string]any `json:"args,omitempty"`
	Postcondition *Postcondition `json:"postcondition,omitempty"`
	OnUncertain   string         `json:"on_uncertain,omitempty"`
	Plan          *Plan          `json:"plan,omitempty"`
}

// Postcondition is what a run_command step declares it leaves behind.
type Postcondition struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
}

// Fault says where a run's injected faults fire, as the kernel's fault
// injector takes it: an operation id (or tool name) whose first matching
// execution per run faults after its effect committed, and one that faults
// before it began. The injector serves the run's worker, so it applies to a
// delegated child run too.
type Fault struct {
	AfterEffect  string `json:"after_effect,omitempty"`
	BeforeEffect string `json:"before_effect,omitempty"`
}

// Lose says how a drill loses a run mid-step. The step's command carries
// Marker in its command line (a no-op ": <marker>", so the workspace holds
// nothing but the command's real effects) and sleeps before or after
// writing Effect; the drill waits until the command is under way (Effect
// exists when AfterEffect, a process with Marker in its command line
// otherwise) and then terminates the run's workflow and stops its worker,
// as if both were lost at once, so no terminal event is ever recorded and
// the listing shows the operation in crash_window. The truth is observed,
// not assumed: once no process of the command is left, the drill checks
// whether Effect exists in the workspace and records that (fault.Lost).
type Lose struct {
	OperationID string `json:"operation_id"`
	Marker      string `json:"marker"`
	Effect      string `json:"effect"`
	AfterEffect bool   `json:"after_effect"`
}

// Scenario is one generated drill: a run to start and its faults.
type Scenario struct {
	// Index is the scenario's position in the generated set (0-based).
	Index int
	Kind  string
	// RunID is unique per seed and index; it names the fixture too.
	RunID string
	Plan  Plan
	// Fault configures the injector of the worker that executes the run
	// (and its delegated children).
	Fault Fault
	// Lose, when set, makes the drill lose the run in the middle of a step
	// instead of injecting a fault (KindCmdCrashWindow).
	Lose *Lose
	// ReconcileChild asks the drill to reconcile the child's uncertain
	// operations as an operator (with their recorded truth) before the
	// parent's wall is built.
	ReconcileChild bool
	// SweepSkew sets the sweeper's clock that far ahead of the database's
	// when the wall is built (KindClockSkew): the probes measure waits on
	// the database's clock and record the skew.
	SweepSkew time.Duration
	// Agent, when set, makes the run an external agent's (KindAgentRun):
	// no kernel run is started; the drill makes the agent's call itself,
	// or not, and reports it as the agent would.
	Agent *AgentCall
	// Outlives, when set, runs the plan on a worker whose sandbox is
	// unconfined (RECKON_SANDBOX_UNCONFINED) with a tool call bounded to
	// OutlivedCall (KindCmdTimeoutRunning): the step's command leaves a
	// process of its own session behind, marked and writing as Lose
	// describes, and the call times out while that process keeps running;
	// the drill observes its effect once it ended.
	Outlives *Lose
	// OtherWrite, when set, is a call another agent makes to the same
	// store after the run and before its wall is built (KindSharedStore).
	OtherWrite *Step
	// KernelAgent, when set, makes the run a kernel agent run driven by
	// the scripted model (kernel_agent_* kinds, kernelagent.go): Plan is
	// empty and Fault names the call's operation op-<n>-<call id>.
	KernelAgent *KernelAgent
	// Tau2, when set, is the tau2-retail case the plan replays: the drill
	// takes the truth from the database's diff too (Stack.tau2Truth).
	Tau2 *Tau2Case
	// SQLite and Git, when set, are the real-server case the plan drives
	// (mcp-sqlite, git-mcp-server): the drill seeds the run's store before
	// the run and takes the truth from its diff too (Stack.storeTruth).
	SQLite *SQLiteCase
	Git    *GitCase
	// Notes describe the scenario for people reading the fixture.
	Notes string
}

// Generate returns count scenarios from seed. Kinds are dealt round-robin
// in a seeded shuffle per round, so any count of at least len(Kinds) covers
// every kind; file names, contents, titles, step counts and the position of
// the faulted step vary with the seed. The same seed always yields the same
// scenarios.
func Generate(seed uint64, count int) []Scenario {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]Scenario, 0, count)
	var deck []string
	for i := 0; i < count; i++ {
		if len(deck) == 0 {
			deck = append([]string(nil), Kinds...)
			r.Shuffle(len(deck), func(a, b int) { deck[a], deck[b] = deck[b], deck[a] })
		}
		kind := deck[0]
		deck = deck[1:]
		g := gen{r: r}
		s := g.build(kind)
		s.Index, s.Kind = i, kind
		s.RunID = fmt.Sprintf("s%d-%03d-%s", seed, i, strings.ReplaceAll(kind, "_", "-"))
		out = append(out, s)
	}
	return out
}

type gen struct{ r *rand.Rand }

var (
	nouns  = []string{"report", "ledger", "invoice", "backup", "summary", "roster", "digest", "manifest", "changelog", "inventory"}
	topics = []string{"Disk full on db-3", "Rotate TLS cert for api-gw", "Flaky test in billing", "Backfill March invoices",
		"Upgrade PostgreSQL to 16", "Queue lag on ingest", "Stale DNS for staging", "Leaked token in CI logs"}
)

func (g gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

// fileName returns a fresh name like report-4821.txt.
func (g gen) fileName(ext string) string {
	return fmt.Sprintf("%s-%04d.%s", g.pick(nouns), g.r.IntN(10000), ext)
}

func (g gen) text() string {
	return fmt.Sprintf("%s entry %d for %s", g.pick(nouns), g.r.IntN(1000), g.pick([]string{"alpha", "bravo", "carol", "delta", "echo"}))
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// shellQuote single-quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writeStep writes text+"\n" to name; with post it declares the exact file.
func (g gen) writeStep(name, text string, post bool) Step {
	s := Step{Tool: "run_command", Args: map[string]any{"command": "printf '%s\\n' " + shellQuote(text) + " > " + name, "timeout_s": 30}}
	if post {
		s.Postcondition = &Postcondition{Path: name, SHA256: sha(text + "\n")}
	}
	return s
}

// setup returns 0..max harmless steps that complete before the faulted one.
func (g gen) setup(max int) []Step {
	n := g.r.IntN(max + 1)
	var out []Step
	for i := 0; i < n; i++ {
		switch g.r.IntN(3) {
		case 0:
			out = append(out, Step{Tool: "run_command", Args: map[string]any{"command": "echo preparing", "timeout_s": 30}})
		case 1:
			out = append(out, g.writeStep("prep-"+g.fileName("txt"), g.text(), false))
		default:
			out = append(out, Step{Tool: "run_command", Args: map[string]any{"command": "mkdir -p work && ls", "timeout_s": 30}})
		}
	}
	return out
}

// tail returns steps after the faulted one; they never run, because the
// run stops after an uncertain failure that does not ask for a reissue.
func (g gen) tail() []Step {
	if g.r.IntN(2) == 0 {
		return nil
	}
	return []Step{g.writeStep("after-"+g.fileName("txt"), g.text(), g.r.IntN(2) == 0)}
}

// faulted assembles setup + target + tail and returns the target's op id.
func (g gen) faulted(target Step) (Plan, string) {
	steps := g.setup(2)
	steps = append(steps, target)
	id := fmt.Sprintf("op-%d", len(steps))
	steps = append(steps, g.tail()...)
	return Plan{Steps: steps}, id
}

func (g gen) issueStep(title string) Step {
	return Step{Tool: "mcp__create_issue", Args: map[string]any{"title": title, "body": g.text()}}
}

// WorkspacePlaceholder in a step's args is replaced by the run's absolute
// workspace when the drill starts the run (the filesystem server takes
// absolute paths inside its root).
const WorkspacePlaceholder = "{workspace}"

func (g gen) fsWriteStep(name, content string) Step {
	return Step{Tool: "mcp__write_file", Args: map[string]any{"path": WorkspacePlaceholder + "/" + name, "content": content}}
}

// build generates one scenario of kind. Each kind's generator draws from
// g.r in its own fixed order, so a seed always yields the same scenarios.
func (g gen) build(kind string) Scenario {
	switch kind {
	case KindCmdWriteAfterPost, KindCmdWriteAfterBare, KindCmdWriteBeforePost, KindCmdWriteBeforeBare:
		return g.cmdWrite(kind)
	case KindCmdAppendAfter:
		return g.cmdAppendAfter()
	case KindCmdMkdirAfter:
		return g.cmdMkdirAfter()
	case KindMCPIssueAfter, KindMCPIssueBefore:
		return g.mcpIssue(kind == KindMCPIssueAfter)
	case KindFSWriteAfter, KindFSWriteBefore:
		return g.fsWrite(kind == KindFSWriteAfter)
	case KindDelegateUnsettled, KindDelegateSettled:
		return g.delegate(kind == KindDelegateSettled)
	case KindMultiReissue:
		return g.multiReissue()
	case KindClaimsSuccess:
		return g.claimsSuccess()
	case KindClaimsNothing:
		return g.claimsNothing()
	case KindCmdCrashWindow, KindCmdPartialWrite:
		return g.cmdLost(kind == KindCmdPartialWrite)
	case KindCmdMkdirBefore:
		return g.cmdMkdirBefore()
	case KindCmdRemoveAfter, KindCmdAppendBefore:
		return g.cmdOnEarlierFile(kind == KindCmdRemoveAfter)
	case KindReissueNewFile:
		return g.reissueNewFile()
	case KindMemoryAfter, KindMemoryBefore:
		return g.memory(kind == KindMemoryAfter)
	case KindMCPNoLookup:
		return g.mcpNoLookup()
	case KindAgentRun:
		return g.agentRun()
	case KindCmdTimeoutRunning:
		return g.cmdTimeoutRunning()
	case KindClockSkew:
		return g.clockSkew()
	case KindSharedStore:
		return g.sharedStore()
	case KindKernelAgentCmd, KindKernelAgentMCP, KindKernelAgentResumed:
		return g.kernelAgent(kind)
	default:
		panic("drill: unknown kind " + kind)
	}
}

// faultAt faults operation id after its effect when after is true, else
// before it, and says which ("after" or "before") for the notes.
func (s *Scenario) faultAt(id string, after bool) string {
	if after {
		s.Fault.AfterEffect = id
		return "after"
	}
	s.Fault.BeforeEffect = id
	return "before"
}

// cmdWrite: run_command writes a file, faulted after or before the
// effect, with or without the file declared.
func (g gen) cmdWrite(kind string) Scenario {
	var s Scenario
	post := kind == KindCmdWriteAfterPost || kind == KindCmdWriteBeforePost
	name := g.fileName("txt")
	plan, id := g.faulted(g.writeStep(name, g.text(), post))
	s.Plan = plan
	when := s.faultAt(id, !strings.Contains(kind, "before"))
	s.Notes = fmt.Sprintf("run_command writes %s; fault %s the effect of %s", name, when, id)
	if post {
		s.Notes += "; the step declares the file's path and sha256, so the workspace probe can check it"
	} else {
		s.Notes += "; nothing declared, so nothing on the wall can prove either way"
	}
	return s
}

// cmdAppendAfter: run_command appends a line to a log, faulted after.
func (g gen) cmdAppendAfter() Scenario {
	var s Scenario
	name := g.fileName("log")
	line := g.text()
	st := Step{Tool: "run_command", Args: map[string]any{"command": "printf '%s\\n' " + shellQuote(line) + " >> " + name, "timeout_s": 30}}
	post := g.r.IntN(2) == 0
	if post {
		st.Postcondition = &Postcondition{Path: name, SHA256: sha(line + "\n")}
	}
	s.Plan, s.Fault.AfterEffect = g.faulted(st)
	s.Notes = fmt.Sprintf("run_command appends a line to %s (postcondition declared: %v); fault after the effect", name, post)
	return s
}

// cmdMkdirAfter: run_command creates a directory, faulted after.
func (g gen) cmdMkdirAfter() Scenario {
	var s Scenario
	dir := "out/" + strings.TrimSuffix(g.fileName("d"), ".d")
	st := Step{Tool: "run_command", Args: map[string]any{"command": "mkdir -p " + dir, "timeout_s": 30}}
	post := g.r.IntN(2) == 0
	if post {
		st.Postcondition = &Postcondition{Path: dir}
	}
	s.Plan, s.Fault.AfterEffect = g.faulted(st)
	s.Notes = fmt.Sprintf("run_command creates directory %s (postcondition declared: %v, but a directory is not a file the probe can prove); fault after the effect", dir, post)
	return s
}

// mcpIssue: create_issue on the test MCP server, faulted after the issue
// was created or before the call was sent.
func (g gen) mcpIssue(after bool) Scenario {
	var s Scenario
	title := g.pick(topics)
	plan, id := g.faulted(g.issueStep(title))
	s.Plan = plan
	s.faultAt(id, after)
	s.Notes = fmt.Sprintf("create_issue %q on the test MCP server; fault %s", title, faultWhen(after, "the issue was created"))
	return s
}

// fsWrite: the filesystem server's write_file, faulted after the file was
// written or before the call was sent.
func (g gen) fsWrite(after bool) Scenario {
	var s Scenario
	name := g.fileName("md")
	plan, id := g.faulted(g.fsWriteStep(name, "# "+g.text()+"\n"))
	s.Plan = plan
	s.faultAt(id, after)
	s.Notes = fmt.Sprintf("filesystem-server write_file %s; fault %s", name, faultWhen(after, "the file was written"))
	return s
}

// faultWhen says when an MCP call's fault fires: after done, or before the
// call was sent.
func faultWhen(after bool, done string) string {
	if after {
		return "after " + done
	}
	return "before the call was sent"
}

// delegate: a parent run delegates to a child run whose write faults; the
// child's operation stays unsettled, or an operator reconciles it.
func (g gen) delegate(settled bool) Scenario {
	var s Scenario
	// The parent's delegate step and the child's faulted step share
	// the operation id op-<m+1>: the injector serves both runs, and in
	// the parent that id is the delegation itself, which never goes
	// through a tool execution, so only the child's step faults.
	m := g.r.IntN(2)
	var steps []Step
	child := Plan{}
	for i := 0; i < m; i++ {
		steps = append(steps, Step{Tool: "run_command", Args: map[string]any{"command": "echo parent step", "timeout_s": 30}})
		child.Steps = append(child.Steps, Step{Tool: "run_command", Args: map[string]any{"command": "echo child step", "timeout_s": 30}})
	}
	name := g.fileName("txt")
	child.Steps = append(child.Steps, g.writeStep(name, g.text(), g.r.IntN(2) == 0))
	id := fmt.Sprintf("op-%d", m+1)
	when := s.faultAt(id, g.r.IntN(3) != 0)
	steps = append(steps, Step{Tool: "delegate", Plan: &child})
	s.Plan = Plan{Steps: steps}
	s.Notes = fmt.Sprintf("delegate %s starts a child run whose %s (writes %s) faults %s its effect; the delegation's truth is what its child did, by the kernel's rule: occurred when a child operation's effect landed, none when none did", id, id, name, when)
	if settled {
		s.ReconcileChild = true
		s.Notes += "; an operator then reconciled the child's operation from its recorded truth, so the child run is fully settled"
	} else {
		s.Notes += "; the child's operation stays unsettled"
	}
	return s
}

// multiReissue: two uncertain operations (one faulted after its effect,
// one before), each re-issued as a new operation that completes: the
// originals stay on the wall. Sometimes a clean step sits between.
func (g gen) multiReissue() Scenario {
	var s Scenario
	steps := g.setup(1)
	steps = append(steps, g.reissuedStep())
	first := fmt.Sprintf("op-%d", len(steps))
	if g.r.IntN(2) == 0 {
		steps = append(steps, Step{Tool: "run_command", Args: map[string]any{"command": "echo between", "timeout_s": 30}})
	}
	steps = append(steps, g.reissuedStep())
	second := fmt.Sprintf("op-%d", len(steps))
	if g.r.IntN(2) == 0 {
		s.Fault = Fault{AfterEffect: first, BeforeEffect: second}
	} else {
		s.Fault = Fault{AfterEffect: second, BeforeEffect: first}
	}
	s.Plan = Plan{Steps: steps}
	s.Notes = fmt.Sprintf("on_uncertain=reissue on every step; fault after the effect of %s and before the effect of %s; both re-issues complete", s.Fault.AfterEffect, s.Fault.BeforeEffect)
	return s
}

// reissuedStep is a file write, an issue or a filesystem-server write,
// re-issued when its effect is uncertain.
func (g gen) reissuedStep() Step {
	var st Step
	switch g.r.IntN(3) {
	case 0:
		st = g.writeStep(g.fileName("txt"), g.text(), g.r.IntN(2) == 0)
	case 1:
		st = g.issueStep(g.pick(topics))
	default:
		st = g.fsWriteStep(g.fileName("md"), g.text()+"\n")
	}
	st.OnUncertain = "reissue"
	return st
}

// claimsSuccess: the agent's text says it is all done; the fault fired
// before the effect, so nothing happened.
func (g gen) claimsSuccess() Scenario {
	var s Scenario
	var target Step
	claim := "DONE: issue filed and verified, nothing left to do"
	if g.r.IntN(2) == 0 {
		target = g.issueStep(claim + " — " + g.pick(topics))
	} else {
		name := g.fileName("txt")
		target = Step{Tool: "run_command", Args: map[string]any{"command": "printf 'done, issue filed\\n' > " + name, "timeout_s": 30,
			"summary": "done, issue filed — the file is written and verified"}}
	}
	plan, id := g.faulted(target)
	s.Plan, s.Fault.BeforeEffect = plan, id
	s.Notes = fmt.Sprintf("the agent's own text in the args of %s claims it is done; the fault fired before the effect, so nothing happened", id)
	return s
}

// claimsNothing: the agent's text says nothing was done; the effect
// landed.
func (g gen) claimsNothing() Scenario {
	var s Scenario
	var target Step
	if g.r.IntN(2) == 0 {
		target = g.issueStep("DRAFT ONLY, NOT FILED: " + g.pick(topics))
	} else {
		name := g.fileName("txt")
		target = Step{Tool: "run_command", Args: map[string]any{"command": "printf 'dry run\\n' > " + name, "timeout_s": 30,
			"summary": "dry run: no changes were made, this step failed and can be retried"}}
	}
	plan, id := g.faulted(target)
	s.Plan, s.Fault.AfterEffect = plan, id
	s.Notes = fmt.Sprintf("the agent's own text in the args of %s claims nothing was done; the fault fired after the effect, so it landed", id)
	return s
}

// cmdLost: the run's workflow and worker are lost while run_command runs,
// before or after its write (crash window), or between its two writes
// (partial write).
func (g gen) cmdLost(partial bool) Scenario {
	var s Scenario
	name, text := g.fileName("txt"), g.text()
	marker := "underway-" + g.fileName("mark")
	write := "printf '%s\\n' " + shellQuote(text) + " > " + name
	after := partial || g.r.IntN(2) == 0
	// The sleep outlasts the drill, which kills the command within
	// milliseconds; the timeout stays short because a probe proves a
	// missing effect only once the command's timeout has passed. The
	// marker makes the command's processes findable by their command
	// line without writing anything into the workspace.
	cmd := ": " + marker + " && sleep 100 && " + write
	if after {
		cmd = write + " && : " + marker + " && sleep 100"
	}
	effect, second := name, ""
	if partial {
		// The first file lands, the command is lost before the second:
		// a partial write is an effect that occurred.
		second = g.fileName("txt")
		cmd += " && printf '%s\\n' " + shellQuote(g.text()) + " > " + second
	}
	st := Step{Tool: "run_command", Args: map[string]any{"command": cmd, "timeout_s": 120}}
	post := g.r.IntN(2) == 0
	if post && second == "" {
		st.Postcondition = &Postcondition{Path: name, SHA256: sha(text + "\n")}
	}
	steps := append(g.setup(2), st)
	id := fmt.Sprintf("op-%d", len(steps))
	s.Plan = Plan{Steps: steps}
	s.Lose = &Lose{OperationID: id, Marker: marker, Effect: effect, AfterEffect: after}
	when := "before"
	if after {
		when = "after"
	}
	if second != "" {
		s.Notes = fmt.Sprintf("run_command of %s writes %s, then %s; the run's workflow and worker are lost between the two (terminated and stopped mid-command): a partial write, crash_window", id, name, second)
	} else {
		s.Notes = fmt.Sprintf("run_command of %s writes %s; the run's workflow and worker are lost %s the effect (terminated and stopped mid-command), so no terminal event is ever recorded: crash_window (postcondition declared: %v)", id, name, when, post)
	}
	return s
}

// cmdMkdirBefore: run_command creates a directory, faulted before.
func (g gen) cmdMkdirBefore() Scenario {
	var s Scenario
	dir := "out/" + strings.TrimSuffix(g.fileName("d"), ".d")
	plan, id := g.faulted(Step{Tool: "run_command", Args: map[string]any{"command": "mkdir -p " + dir, "timeout_s": 30}})
	s.Plan, s.Fault.BeforeEffect = plan, id
	s.Notes = fmt.Sprintf("run_command creates directory %s; fault before the effect", dir)
	return s
}

// cmdOnEarlierFile: an earlier step writes a file; a bare run_command
// removes it (faulted after) or appends to it (faulted before).
func (g gen) cmdOnEarlierFile(remove bool) Scenario {
	var s Scenario
	name := g.fileName("txt")
	steps := append(g.setup(1), g.writeStep(name, g.text(), false))
	cmd := "rm " + name
	if !remove {
		cmd = "printf '%s\\n' " + shellQuote(g.text()) + " >> " + name
	}
	steps = append(steps, Step{Tool: "run_command", Args: map[string]any{"command": cmd, "timeout_s": 30}})
	id := fmt.Sprintf("op-%d", len(steps))
	steps = append(steps, g.tail()...)
	s.Plan = Plan{Steps: steps}
	s.faultAt(id, remove)
	if remove {
		s.Notes = fmt.Sprintf("an earlier step writes %s; run_command %s removes it (nothing declared); fault after the effect", name, id)
	} else {
		s.Notes = fmt.Sprintf("an earlier step writes %s; run_command %s appends to it (nothing declared); fault before the effect", name, id)
	}
	return s
}

// reissueNewFile: every execution writes a file named by the clock, so the
// re-issue writes a different file than the original did.
func (g gen) reissueNewFile() Scenario {
	var s Scenario
	prefix := strings.TrimSuffix(g.fileName("x"), ".x")
	st := Step{Tool: "run_command", Args: map[string]any{"command": "printf '%s\\n' " + shellQuote(g.text()) + " > " + prefix + "-$(date +%s%N).txt", "timeout_s": 30},
		OnUncertain: "reissue"}
	plan, id := g.faulted(st)
	s.Plan = plan
	when := s.faultAt(id, g.r.IntN(2) == 0)
	s.Notes = fmt.Sprintf("on_uncertain=reissue; every execution of %s writes a new %s-<clock>.txt; fault %s the effect of the original, and the re-issue completes", id, prefix, when)
	return s
}

// memory: a server-memory call (create_entities, add_observations or
// create_relations) after a setup that creates what it refers to, faulted
// after the effect or before the call was sent.
func (g gen) memory(after bool) Scenario {
	var s Scenario
	entity := fmt.Sprintf("%s-%04d", g.pick(nouns), g.r.IntN(10000))
	setup, target, what := g.memoryCall(entity)
	steps := append(setup, target)
	id := fmt.Sprintf("op-%d", len(steps))
	s.Plan = Plan{Steps: steps}
	s.faultAt(id, after)
	if after {
		s.Notes = fmt.Sprintf("server-memory %s (%s); fault after the effect", what, id)
	} else {
		s.Notes = fmt.Sprintf("server-memory %s (%s); fault before the call was sent", what, id)
	}
	return s
}

// memoryCall is the setup, the faulted call and its description of a
// memory scenario about entity.
func (g gen) memoryCall(entity string) (setup []Step, target Step, what string) {
	setup = []Step{{Tool: "mcp__create_entities", Args: map[string]any{"entities": []any{
		map[string]any{"name": entity + "-base", "entityType": "service", "observations": []any{g.text()}}}}}}
	switch g.r.IntN(3) {
	case 0:
		target = Step{Tool: "mcp__create_entities", Args: map[string]any{"entities": []any{
			map[string]any{"name": entity, "entityType": "incident", "observations": []any{g.text()}}}}}
		what = "create_entities " + entity
	case 1:
		target = Step{Tool: "mcp__add_observations", Args: map[string]any{"observations": []any{
			map[string]any{"entityName": entity + "-base", "contents": []any{g.text()}}}}}
		what = "add_observations to " + entity + "-base"
	default:
		setup = append(setup, Step{Tool: "mcp__create_entities", Args: map[string]any{"entities": []any{
			map[string]any{"name": entity, "entityType": "incident", "observations": []any{}}}}})
		target = Step{Tool: "mcp__create_relations", Args: map[string]any{"relations": []any{
			map[string]any{"from": entity, "to": entity + "-base", "relationType": "affects"}}}}
		what = "create_relations " + entity + " affects " + entity + "-base"
	}
	return setup, target, what
}

// AgentCall is an external agent's call in an agent_run drill: the agent
// files an issue on the test MCP server with its own client (its own key,
// not reckon's) when Lands, and reports tool.started and an uncertain
// tool.failed either way.
type AgentCall struct {
	Source      string `json:"source"`
	OperationID string `json:"operation_id"`
	Title       string `json:"title"`
	Lands       bool   `json:"lands"`
}

// mcpNoLookup: create_issue on a server that cannot be asked what
// happened to a call, faulted after or before the effect.
func (g gen) mcpNoLookup() Scenario {
	var s Scenario
	title := g.pick(topics)
	st := Step{Tool: "mcp__" + NotesServer + "__create_issue", Args: map[string]any{"title": title, "body": g.text()}}
	plan, id := g.faulted(st)
	s.Plan = plan
	after := g.r.IntN(2) == 0
	s.faultAt(id, after)
	s.Notes = fmt.Sprintf("create_issue %q on server %s, which offers no lookup_operation and has no probe contract; fault %s: nothing on the wall can decide it",
		title, NotesServer, faultWhen(after, "the issue was created"))
	return s
}

// agentRun: an external agent's own run; its call landed or was never
// sent, and it reports an uncertain failure either way.
func (g gen) agentRun() Scenario {
	var s Scenario
	lands := g.r.IntN(2) == 0
	s.Agent = &AgentCall{Source: "agent-drill", OperationID: fmt.Sprintf("call-%d", 1+g.r.IntN(9)), Title: g.pick(topics), Lands: lands}
	what := "its call never reached the server"
	if lands {
		what = "its call filed the issue"
	}
	s.Notes = fmt.Sprintf("an external agent (source %s) reports its own run: create_issue %q with its own client, then an uncertain tool.failed; %s. "+
		"The agent's report is its claim, and the server has never seen reckon's key for a call reckon did not make", s.Agent.Source, s.Agent.Title, what)
	return s
}

// OutlivedCall bounds the tool call of a cmd_timeout_running drill: its
// command's left-behind process writes (or exits) after it.
const OutlivedCall = 3 * time.Second

// cmdTimeoutRunning: an unconfined command starts a process in a session
// of its own, which sleeps past the call's timeout and then writes its
// file, or exits without writing; the command itself outlasts the call,
// which times out (tool.failed activity_failed) and is killed with its
// process group, while the left-behind process keeps running.
func (g gen) cmdTimeoutRunning() Scenario {
	var s Scenario
	name, text := g.fileName("txt"), g.text()
	marker := "running-" + g.fileName("mark")
	writes := g.r.IntN(2) == 0
	behind := ": " + marker + " && sleep 5 && printf '%s\\n' " + shellQuote(text) + " > " + name
	if !writes {
		behind = ": " + marker + " && sleep 5 && test -e " + name
	}
	cmd := "setsid sh -c " + shellQuote(behind) + " >/dev/null 2>&1 </dev/null & sleep 20"
	st := Step{Tool: "run_command", Args: map[string]any{"command": cmd, "timeout_s": 30}}
	if g.r.IntN(2) == 0 {
		st.Postcondition = &Postcondition{Path: name, SHA256: sha(text + "\n")}
	}
	// The run's first step: an earlier unconfined command could have left
	// a process of its own behind too, and nothing after it would be
	// attributable.
	s.Plan = Plan{Steps: []Step{st}}
	id := "op-1"
	s.Outlives = &Lose{OperationID: id, Marker: marker, Effect: name, AfterEffect: writes}
	s.Notes = fmt.Sprintf("run_command of %s, unconfined (RECKON_SANDBOX_UNCONFINED), leaves a process in a session of its own that sleeps 5 s, then %s; "+
		"the call is bounded to %s, so it times out (tool.failed activity_failed) while that process keeps running (postcondition declared: %v)",
		id, map[bool]string{true: "writes " + name, false: "exits without writing"}[writes], OutlivedCall, st.Postcondition != nil)
	return s
}

// clockSkew: create_issue faulted after or before the effect, swept with
// the sweeper's clock ahead of the database's.
func (g gen) clockSkew() Scenario {
	s := g.mcpIssue(g.r.IntN(2) == 0)
	s.SweepSkew = SkewedSweep
	s.Notes += fmt.Sprintf("; the sweeper's clock runs %s ahead of the database's: a sweep %s after the run must defer a never_seen, and a later one records the skew", SkewedSweep, EarlySweep)
	return s
}

// sharedStore: a server-memory write to a store another agent writes too,
// which creates the same entity after the run; faulted after or before.
func (g gen) sharedStore() Scenario {
	var s Scenario
	entity := fmt.Sprintf("%s-%04d", g.pick(nouns), g.r.IntN(10000))
	create := Step{Tool: "mcp__" + SharedMemoryServer + "__create_entities", Args: map[string]any{"entities": []any{
		map[string]any{"name": entity, "entityType": "incident", "observations": []any{g.text()}}}}}
	plan, id := g.faulted(create)
	s.Plan = plan
	after := g.r.IntN(2) == 0
	s.faultAt(id, after)
	other := create
	other.Args = map[string]any{"entities": []any{map[string]any{"name": entity, "entityType": "incident", "observations": []any{"seen by another agent"}}}}
	s.OtherWrite = &other
	s.Notes = fmt.Sprintf("server-memory create_entities %s (%s) on a store shared with another agent, which creates the same entity after the run; fault %s. "+
		"The store is not declared exclusive and the entity carries nothing only this call could make",
		entity, id, faultWhen(after, "the entity was created"))
	return s
}
