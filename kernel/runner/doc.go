// Package runner runs a plan as a Temporal workflow and records, through the
// outbox, every step of it as the kernel's events.
//
// A run starts with Starter.Start (POST /v1/runs): under the run id's
// advisory lock it refuses an id (or the id of a child run its plan may
// start) that holds events the kernel did not write, records the run in
// kernel_runs, creates its workspace and starts the workflow RunWorkflow
// under a deterministic workflow id, so that the same request again
// returns the same run and a different plan under the same id is a
// conflict.
//
// RunWorkflow records run.started, then each step as one operation
// (op-<n>): tool.started before anything runs, then the tool or the child
// run, then tool.completed or tool.failed, and finally run.completed or
// run.failed. Its activities are RecordEvent (one event into the outbox;
// the event is stamped with workflow time, so a retry or a replay
// re-enqueues the identical event as a no-op), RunTool (the call itself), ResolveTool
// (the server an MCP tool resolves to, recorded in tool.started and the
// call pinned to it), SnapshotWorkspace (a manifest of the workspace
// before and after a tool that writes it) and SummarizeChildRun. Changes
// to the workflow's behaviour are gated by workflow.GetVersion (the
// Change* constants), so recorded histories replay unchanged.
//
// A tool call gets exactly one attempt: RunTool has no retry policy, and a
// consequential call is never executed again behind anyone's back. Its
// failure is classified by its effect: none (nothing happened, e.g. the
// tool refused the arguments), occurred, or uncertain (the call may have
// crossed the execution boundary and its answer says nothing of it: a
// timeout, a dead worker noticed by the missed heartbeat, a cancel, a
// command that failed after it ran). An uncertain operation stays listed
// until it is reconciled.
//
// A step's on_uncertain says what follows an uncertain failure: "stop",
// the default, ends the run with run.failed; "reissue" issues the step
// again as a new operation (op-<n>-r<k>, its tool.started naming the
// original in reissue_of), at most MaxReissues times, and never once the
// run is canceled. Any other failure ends the run.
//
// A delegate step starts a child run of its own plan as a child workflow,
// run id <parent>.<operation> (kernel.ChildRunID), in a sibling workspace.
// A completed child completes the delegation; one that never started is
// effect none; a failed one is summarized from the journal once its events
// are delivered (SummarizeChildRun, kernel.Replay): the delegation occurred
// when every operation of the child is settled (none when the child
// performed none), and is uncertain while any is not.
package runner
