-- +goose Up
-- The MCP gateway (`reckon mcp-gateway`). Its events go to the outbox like
-- everyone's; these two tables are its bookkeeping, never read by the
-- operations projection.
--
-- gateway_instances: one row per running gateway process. An instance
-- renews heartbeat_at every lease/3; one whose heartbeat is older than its
-- lease (or that says it stopped) is dead, and any live gateway ends the
-- session runs it held with run.failed, so their unanswered calls move from
-- "in flight" to the crash window.
CREATE TABLE gateway_instances (
    instance_id  text PRIMARY KEY,
    source_id    text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    lease        interval NOT NULL,
    stopped_at   timestamptz
);

-- gateway_runs: every run the gateway has journaled run.started for, with
-- the per-run operation counter (op-<n>): incremented in the transaction
-- that enqueues tool.started, so no two calls of a run, in any gateway
-- process, before or after a restart, get the same operation id.
-- kind 'session' = the run of one MCP session (instance_id holds it);
-- kind 'client' = a run id the client named in _meta (dev.reckon/run-id),
-- which outlives sessions and is never ended by the gateway.
CREATE TABLE gateway_runs (
    project     text NOT NULL,
    run_id      text NOT NULL,
    source_id   text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('session', 'client')),
    instance_id text,
    last_op     bigint NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    ended_at    timestamptz,
    PRIMARY KEY (project, run_id)
);
CREATE INDEX gateway_runs_open_sessions ON gateway_runs (instance_id)
    WHERE kind = 'session' AND ended_at IS NULL;

-- +goose Down
DROP TABLE gateway_runs;
DROP TABLE gateway_instances;
