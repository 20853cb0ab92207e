-- Reference table for the pgbench comparison: the shape and indexes of
-- journal_events, without reckon's logic.
DROP SCHEMA IF EXISTS pgbench_ref CASCADE;
CREATE SCHEMA pgbench_ref;
CREATE TABLE pgbench_ref.events (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_id text NOT NULL, event_id text NOT NULL, project text NOT NULL, run_id text NOT NULL,
    type text NOT NULL, ts timestamptz NOT NULL, actor text NOT NULL,
    parent_source_id text, parent_event_id text, data jsonb NOT NULL, payload_digest bytea NOT NULL,
    ingested_at timestamptz NOT NULL DEFAULT now(), operation_id text,
    settles boolean NOT NULL DEFAULT false, open boolean NOT NULL DEFAULT false,
    UNIQUE (source_id, event_id));
CREATE INDEX ON pgbench_ref.events (project, run_id, seq);
CREATE INDEX ON pgbench_ref.events (project, type, ts);
CREATE INDEX ON pgbench_ref.events (project, run_id, operation_id) WHERE operation_id IS NOT NULL;
CREATE INDEX ON pgbench_ref.events (project, ts, seq) WHERE type = 'tool.started' AND open;
