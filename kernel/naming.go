package kernel

import (
	"regexp"
	"strings"
	"time"
)

// Names the kernel gives to runs, operations and their events. Every
// package that needs one (the run workflow, the operations projection, the
// probes, ingest's ownership check) takes it from here, so the rules exist
// once.

// Tools the kernel itself knows by name.
const (
	// ToolRunCommand runs a shell command in the run's sandboxed
	// workspace (kernel/sandbox).
	ToolRunCommand = "run_command"
	// DelegateTool runs a child plan as a child run.
	DelegateTool = "delegate"
)

// MaxCommandTimeout is the largest timeout a run_command may have (its
// timeout_s, or the sandbox's default when the call gives none): past
// StartedAt+MaxCommandTimeout nothing of the command can still run, which
// is what lets the workspace probe read a missing file as proof.
const MaxCommandTimeout = 10 * time.Minute

// ChildSeparator joins a parent run id and an operation id into the id of
// the child run a delegation starts (ChildRunID). A run id chosen through
// POST /v1/runs may not contain it, so no client can take a child's id.
const ChildSeparator = "."

// ChildRunID is the run id of the child a delegate operation starts.
func ChildRunID(parentRunID, operationID string) string {
	return parentRunID + ChildSeparator + operationID
}

// RunAncestry lists runID and every run id it may descend from:
// "a.op-1.op-2" → "a", "a.op-1", "a.op-1.op-2".
func RunAncestry(runID string) []string {
	var out []string
	for i := 1; i < len(runID); i++ {
		if strings.HasPrefix(runID[i:], ChildSeparator) {
			out = append(out, runID[:i])
		}
	}
	return append(out, runID)
}

// AncestryPairs lists every run of runs and every run its id descends
// from (RunAncestry), each once, in order, as the parallel project and run
// id slices a SQL unnest takes: what a check for kernel runs must look up,
// since a kernel run's child runs are the kernel's too.
func AncestryPairs(runs []RunKey) (projects, runIDs []string) {
	seen := map[RunKey]bool{}
	for _, r := range runs {
		for _, id := range RunAncestry(r.RunID) {
			k := RunKey{Project: r.Project, RunID: id}
			if !seen[k] {
				seen[k] = true
				projects, runIDs = append(projects, k.Project), append(runIDs, k.RunID)
			}
		}
	}
	return projects, runIDs
}

// WorkflowID is the Temporal workflow id of a kernel run.
func WorkflowID(project, runID string) string { return "reckon/" + project + "/" + runID }

// EventID is the id of a kernel event of a run: <project>/<run_id>/<suffix>
// (suffix run/started, op-2/failed, …). Run ids are unique per project
// only, so the project keeps two projects' runs of the same id apart. Runs
// recorded before this scheme used LegacyEventID; their journal rows keep
// those ids.
func EventID(project, runID, suffix string) string { return project + "/" + runID + "/" + suffix }

// LegacyEventID is the id kernel events had before they carried the
// project: <run_id>/<suffix>.
func LegacyEventID(runID, suffix string) string { return runID + "/" + suffix }

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidateID checks a project or run id of a kernel run: it becomes part
// of a workflow id, event ids and a workspace path, so it is restricted to
// a safe alphabet. The error is an EInvalid naming field.
func ValidateID(field, id string) error {
	if id == "" {
		return Errorf(EInvalid, "%s: required", field)
	}
	if !idRE.MatchString(id) || strings.Contains(id, "..") {
		return Errorf(EInvalid, "%s: must be 1-128 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, without \"..\", got %q", field, id)
	}
	return nil
}
