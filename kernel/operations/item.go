// Package operations is the read side of the journal and the one
// reconciliation path: the listing of every unresolved operation
// (crash_window, stale_in_flight, failed_uncertain) computed from the
// journal on demand, run liveness, the one code path that records a
// reconciliation (an operator's ruling or the supervisor's) as
// operation.reconciled (Reconcile, ReconcileTx), an operation's history,
// the operator's queue, the supervisor's verdicts with the rulings since,
// the projects, and which runs are the kernel's (Owners). It knows nothing
// of HTTP: kernel/httpapi serves it through httpapi.OperationService and
// httpapi.VerdictService.
//
// Operation state is never stored: it is a projection over journal events
// matched by (project, run_id, operation_id), never by source.
package operations

import (
	"encoding/json"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// States of an unresolved operation.
const (
	// StateCrashWindow: no terminal event and the run is no longer running.
	StateCrashWindow = "crash_window"
	// StateStaleInFlight: no terminal event, the run still running, and the
	// operation older than the stale threshold.
	StateStaleInFlight = "stale_in_flight"
	// StateFailedUncertain: tool.failed with effect uncertain (or the legacy
	// failure without an effect).
	StateFailedUncertain = "failed_uncertain"
)

// Item is one unresolved operation as the listing serves it.
type Item struct {
	Project     string          `json:"project"`
	RunID       string          `json:"run_id"`
	OperationID string          `json:"operation_id"`
	Tool        string          `json:"tool"`
	State       string          `json:"state"`
	StartedAt   time.Time       `json:"started_at"`
	StartedKey  kernel.EventKey `json:"started_key"`
	// Args are the call's arguments when their JSON is at most
	// MaxListedArgsBytes; larger ones are left out (ArgsTruncated, with
	// their size in ArgsBytes): the operation's history has them in full.
	Args          json.RawMessage `json:"args,omitempty"`
	ArgsTruncated bool            `json:"args_truncated,omitempty"`
	ArgsBytes     int             `json:"args_bytes,omitempty"`
	// Failure is the operation's newest tool.failed, when it has one.
	Failure *kernel.ToolFailed `json:"failure,omitempty"`
	// FailureKey is that tool.failed's key: its source_id says who
	// reported the failure (the kernel, or an external agent about its own
	// call).
	FailureKey *kernel.EventKey `json:"failure_key,omitempty"`
	// ChildRunID names the child run of a delegation.
	ChildRunID string `json:"child_run_id,omitempty"`
	// ChildSummary counts the child run's operations: the counts its
	// failure carried, or (a delegation without them, in the crash window
	// for one) what the listing counted in the child run's events.
	ChildSummary  *kernel.ChildSummary `json:"child_summary,omitempty"`
	ReissueOf     string               `json:"reissue_of,omitempty"`
	Postcondition json.RawMessage      `json:"postcondition,omitempty"`
	// Server and UpstreamTool name where the MCP gateway sent the call
	// (its tool.started's server and upstream_tool), ServerEndpoint the
	// server's endpoint identity there (server_endpoint).
	Server         string `json:"server,omitempty"`
	UpstreamTool   string `json:"upstream_tool,omitempty"`
	ServerEndpoint string `json:"server_endpoint,omitempty"`
	// LivenessUnknown says the run's liveness could not be established:
	// Temporal unreachable or the listing's budget of liveness calls spent
	// (the page is then degraded), or an external run whose run.started the
	// journal does not have. Such a run is treated as still running: the
	// operation is listed as stale_in_flight once old enough, never as
	// crash_window.
	LivenessUnknown bool `json:"liveness_unknown,omitempty"`
}

// ListParams selects a page of the listing.
type ListParams struct {
	Project string
	// RunID restricts the listing to one run when set.
	RunID string
	// Cursor is a Page.NextCursor from an earlier call; empty starts at the
	// oldest operation inside the window.
	Cursor string
	// Limit bounds the page; 0 means DefaultLimit, at most MaxLimit.
	Limit int
}

// Page is one page of unresolved operations, oldest first.
type Page struct {
	Operations []Item `json:"operations"`
	// NextCursor continues the listing; empty when this is the last page.
	NextCursor string `json:"next_cursor"`
	// Degraded says some run's liveness could not be established; the
	// affected items carry liveness_unknown.
	Degraded bool `json:"degraded"`
}

// Page sizes.
const (
	// MaxListedArgsBytes bounds the args a listing item carries, so a
	// page of DefaultLimit items stays a few megabytes whatever the calls'
	// arguments are (TestListingBoundsArgs).
	MaxListedArgsBytes = 16 << 10
	DefaultLimit       = 100
	MaxLimit           = 1000
)

// position is a place in the listing order (started_at, seq).
type position struct {
	ts  time.Time
	seq int64
}

const cursorPrefix = "v1:"

// encodeCursor makes an opaque listing cursor after p.
func encodeCursor(p position) string { return encodePrefixedCursor(p, cursorPrefix) }

func decodeCursor(s string) (position, error) { return decodePrefixedCursor(s, cursorPrefix) }

// encodePrefixedCursor makes an opaque cursor after p; the prefix keeps the
// cursors of different pagings apart (kernel.EncodeCursor).
func encodePrefixedCursor(p position, prefix string) string {
	return kernel.EncodeCursor(prefix, p.ts, p.seq)
}

func decodePrefixedCursor(s, prefix string) (position, error) {
	ts, seq, err := kernel.DecodeCursor(s, prefix)
	return position{ts: ts, seq: seq}, err
}
