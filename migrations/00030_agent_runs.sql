-- +goose Up
-- Runs that agents report themselves (POST /v1/events, outside kernel and
-- gateway runs) belong to one source: the source of the run's first event.
-- Operations match by (project, run_id, operation_id) whatever the source
-- (docs/design.md), so without an owner a second agent's token could post a
-- tool.completed or a tool.failed effect=none into another agent's run
-- and settle its uncertain operation, each event under its own source.
--
-- agent_runs records the owner. The first guarded write into a run claims
-- it for its event's source (the source of the run's earliest journaled
-- event, for a run journaled before this migration); the primary key makes
-- concurrent first writes take turns, so exactly one source wins. Kernel
-- and gateway runs never get a row: the ingest refuses them before this.
CREATE TABLE agent_runs (
    project    text NOT NULL,
    run_id     text NOT NULL,
    source_id  text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, run_id)
);

-- reckon_check_agent_events(guarded_projects, guarded_run_ids, projects,
-- run_ids, sources) is the whole check of an agents' write, in one
-- statement ahead of its insert and in its transaction (so a refusal
-- writes nothing of the call): first reckon_refuse_kernel_runs over the
-- guarded pairs (the events' runs and every run they descend from), then,
-- for each entry of the other three arrays (one per run and source, in the
-- order of the events), it claims the run for the source when it has no
-- owner yet (so the write's first event of a new run claims it), and
-- raises RK002 when the run belongs to another source. One statement
-- rather than two: single events under group commit pay a statement's
-- overhead per round trip.
-- +goose StatementBegin
-- +reckon include functions/reckon_check_agent_events.sql
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION reckon_check_agent_events(text[], text[], text[], text[], text[]);
DROP TABLE agent_runs;
