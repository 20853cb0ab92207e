-- +goose Up
-- The journal partitioned by time (docs/scaling.md#time-partitions-and-retention):
-- journal_events becomes a table partitioned by ingested_at into weeks,
-- so that old events leave a partition at a time (RECKON_JOURNAL_RETENTION,
-- kernel/retention) instead of by DELETE and vacuum.
--
-- * The idempotency key moves to journal_keys: a unique constraint on a
--   partitioned table must hold the partition key, and (source_id,
--   event_id) must stay unique across every week. The ingest writes a
--   key row and its event in one statement; the key row outlives its
--   event so that a late redelivery is still answered repeated.
-- * The journal so far becomes the oldest partition as it is (its indexes
--   are attached, not rebuilt; only (seq, ingested_at), the new primary
--   key, is built). Writers wait for this migration's transaction: its
--   time is the key table's fill and that one index, both one pass over
--   the journal (docs/scaling.md gives the figure).
-- * journal_runs gains the bounds of each run's events: its first
--   ingested_at and the end of the week of its last. Every read of a
--   run's or an operation's events is bounded by them, so it reads the
--   partitions of the run's weeks, not every partition kept.
-- (IF NOT EXISTS: the runs index's trigger function, one source for
-- 00055 and this migration, writes the columns, so a schema migrated to a
-- version between them has them added before it takes events.)
ALTER TABLE journal_runs ADD COLUMN IF NOT EXISTS first_ingested_at timestamptz;
ALTER TABLE journal_runs ADD COLUMN IF NOT EXISTS ingested_before timestamptz;
-- +goose StatementBegin
-- +reckon include functions/reckon_journal_partitions.sql
-- +goose StatementEnd
UPDATE journal_runs r SET first_ingested_at = f.first, ingested_before = reckon_week_after(f.last)
FROM (SELECT project, run_id, min(ingested_at) AS first, max(ingested_at) AS last
      FROM journal_events GROUP BY project, run_id) f
WHERE r.project = f.project AND r.run_id = f.run_id;
UPDATE journal_runs SET first_ingested_at = started_at WHERE first_ingested_at IS NULL;
UPDATE journal_runs SET ingested_before = reckon_week_after(now()) WHERE ingested_before IS NULL;
ALTER TABLE journal_runs ALTER COLUMN first_ingested_at SET NOT NULL;
ALTER TABLE journal_runs ALTER COLUMN ingested_before SET NOT NULL;

CREATE TABLE journal_keys (
    source_id      text        NOT NULL,
    event_id       text        NOT NULL,
    project        text        NOT NULL,
    run_id         text        NOT NULL,
    seq            bigint      NOT NULL,
    ingested_at    timestamptz NOT NULL DEFAULT now(),
    payload_digest bytea       NOT NULL
);
INSERT INTO journal_keys (source_id, event_id, project, run_id, seq, ingested_at, payload_digest)
SELECT source_id, event_id, project, run_id, seq, ingested_at, payload_digest FROM journal_events;
ALTER TABLE journal_keys ADD CONSTRAINT journal_keys_pkey PRIMARY KEY (source_id, event_id);

-- The journal so far, made ready to be the oldest partition.
DROP TRIGGER journal_events_notify_await ON journal_events;
DROP TRIGGER journal_runs_track ON journal_events;
ALTER TABLE journal_events RENAME TO journal_events_legacy;
ALTER TABLE journal_events_legacy DROP CONSTRAINT journal_events_key;
ALTER TABLE journal_events_legacy DROP CONSTRAINT journal_events_pkey;
ALTER TABLE journal_events_legacy ALTER COLUMN seq DROP IDENTITY;
ALTER INDEX journal_events_run RENAME TO journal_events_legacy_run;
ALTER INDEX journal_events_type_ts RENAME TO journal_events_legacy_type_ts;
ALTER INDEX journal_events_operation RENAME TO journal_events_legacy_operation;
ALTER INDEX journal_events_open_ops RENAME TO journal_events_legacy_open_ops;
ALTER INDEX journal_events_run_lifecycle RENAME TO journal_events_legacy_run_lifecycle;
ALTER INDEX journal_events_supervisor_reconciled RENAME TO journal_events_legacy_supervisor_reconciled;
ALTER INDEX journal_events_awaiting RENAME TO journal_events_legacy_awaiting;
ALTER INDEX journal_events_run_waits RENAME TO journal_events_legacy_run_waits;
ALTER INDEX journal_events_effect_key RENAME TO journal_events_legacy_effect_key;

CREATE TABLE journal_events (
    seq              bigint      GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME journal_events_seq),
    source_id        text        NOT NULL,
    event_id         text        NOT NULL,
    project          text        NOT NULL,
    run_id           text        NOT NULL,
    type             text        NOT NULL,
    ts               timestamptz NOT NULL,
    actor            text        NOT NULL,
    parent_source_id text,
    parent_event_id  text,
    data             jsonb       NOT NULL,
    payload_digest   bytea       NOT NULL,
    ingested_at      timestamptz NOT NULL DEFAULT now(),
    operation_id     text,
    settles          boolean     NOT NULL DEFAULT false,
    open             boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (seq, ingested_at)
) PARTITION BY RANGE (ingested_at);
SELECT setval('journal_events_seq', coalesce(max(seq), 0) + 1, false)
FROM journal_events_legacy;

-- +reckon include tables/journal_events_indexes.sql

-- The oldest partition ends where the week after this migration's begins,
-- so it also takes this week's rows; the default partition takes what no
-- range holds (reckon_journal_extend creates the weeks ahead).
ALTER TABLE journal_events ATTACH PARTITION journal_events_legacy
    FOR VALUES FROM (MINVALUE) TO ((date_trunc('week', now() AT TIME ZONE 'UTC') + interval '7 days') AT TIME ZONE 'UTC');
CREATE TABLE journal_events_default PARTITION OF journal_events DEFAULT;

SELECT reckon_journal_extend(now() + interval '14 days');

-- +goose StatementBegin
-- +reckon include functions/journal_runs_track.sql
-- +goose StatementEnd
-- +reckon include tables/journal_events_triggers.sql

-- +goose Down
-- Back to one table: the partitions' rows copied into it in journal order,
-- the key constraint restored from the events (the key rows of dropped
-- partitions are lost with them). journal_runs keeps the bounds, which
-- the trigger function goes on writing, and so does reckon_week_after.
CREATE TABLE journal_events_flat (LIKE journal_events INCLUDING DEFAULTS);
INSERT INTO journal_events_flat SELECT * FROM journal_events ORDER BY seq;
DROP TABLE journal_events;
DROP TABLE journal_keys;
DROP FUNCTION reckon_journal_extend(timestamptz);
DROP FUNCTION reckon_journal_partitions();
ALTER TABLE journal_events_flat RENAME TO journal_events;
ALTER TABLE journal_events ADD PRIMARY KEY (seq);
ALTER TABLE journal_events ADD CONSTRAINT journal_events_key UNIQUE (source_id, event_id);
-- +reckon include tables/journal_events_indexes.sql
ALTER TABLE journal_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY;
SELECT setval(pg_get_serial_sequence('journal_events', 'seq'), coalesce(max(seq), 0) + 1, false) FROM journal_events;
-- +reckon include tables/journal_events_triggers.sql
