-- Reference tables for the pgbench comparison: the shape and main indexes
-- of the journal (docs/scaling.md#the-idempotency-key), without reckon's
-- logic: the key table, and the events partitioned by ingested_at (one
-- week's partition and the default one), each event written with its key
-- row in one statement.
DROP SCHEMA IF EXISTS pgbench_ref CASCADE;
CREATE SCHEMA pgbench_ref;
CREATE SEQUENCE pgbench_ref.seq;
CREATE TABLE pgbench_ref.keys (
    source_id text NOT NULL, event_id text NOT NULL, project text NOT NULL, run_id text NOT NULL,
    seq bigint NOT NULL, ingested_at timestamptz NOT NULL DEFAULT now(), payload_digest bytea NOT NULL,
    PRIMARY KEY (source_id, event_id));
CREATE TABLE pgbench_ref.events (
    seq bigint NOT NULL,
    source_id text NOT NULL, event_id text NOT NULL, project text NOT NULL, run_id text NOT NULL,
    type text NOT NULL, ts timestamptz NOT NULL, actor text NOT NULL,
    parent_source_id text, parent_event_id text, data jsonb NOT NULL, payload_digest bytea NOT NULL,
    ingested_at timestamptz NOT NULL DEFAULT now(), operation_id text,
    settles boolean NOT NULL DEFAULT false, open boolean NOT NULL DEFAULT false,
    PRIMARY KEY (seq, ingested_at)) PARTITION BY RANGE (ingested_at);
CREATE TABLE pgbench_ref.events_week PARTITION OF pgbench_ref.events
    FOR VALUES FROM (MINVALUE) TO ((date_trunc('week', now() AT TIME ZONE 'UTC') + interval '14 days') AT TIME ZONE 'UTC');
CREATE TABLE pgbench_ref.events_default PARTITION OF pgbench_ref.events DEFAULT;
CREATE INDEX ON pgbench_ref.events (project, run_id, seq);
CREATE INDEX ON pgbench_ref.events (project, type, ts);
CREATE INDEX ON pgbench_ref.events (project, run_id, operation_id) WHERE operation_id IS NOT NULL;
CREATE INDEX ON pgbench_ref.events (project, ts, seq) WHERE type = 'tool.started' AND open;
