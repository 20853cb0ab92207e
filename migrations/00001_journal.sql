-- +goose Up
-- The journal: every fact reckon knows, immutable once written. Operation
-- state is a projection over these rows, never a table of its own.
CREATE TABLE journal_events (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    -- sha256 of the canonical JSON of everything but the key: equal means a
    -- redelivery (repeated), different means a conflict.
    payload_digest   bytea       NOT NULL,
    ingested_at      timestamptz NOT NULL DEFAULT now(),
    -- Derived at ingest from data, for the operations projection's indexes.
    operation_id     text,
    -- true for events that settle their operation (tool.completed,
    -- tool.blocked, tool.failed with effect none|occurred,
    -- operation.reconciled).
    settles          boolean     NOT NULL DEFAULT false,
    -- On tool.started rows only: true while no settling event for the
    -- operation was known at write time. An index hint, derivable from the
    -- events and re-verified by every listing; it keeps the listing's cost
    -- proportional to open operations instead of journal history.
    open             boolean     NOT NULL DEFAULT false,
    CONSTRAINT journal_events_key UNIQUE (source_id, event_id)
);

CREATE INDEX journal_events_run ON journal_events (project, run_id, seq);
CREATE INDEX journal_events_type_ts ON journal_events (project, type, ts);
CREATE INDEX journal_events_operation ON journal_events (project, run_id, operation_id)
    WHERE operation_id IS NOT NULL;
-- The open set: tool.started rows not yet known to be settled.
CREATE INDEX journal_events_open_ops ON journal_events (project, ts, seq)
    WHERE type = 'tool.started' AND open;

-- The transactional outbox: rows are enqueued in the same transaction as
-- whatever they describe and drained to the journal by the publisher.
CREATE TABLE kernel_event_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_id       text        NOT NULL,
    event_id        text        NOT NULL,
    event           jsonb       NOT NULL,
    payload_digest  bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    delivered_at    timestamptz,
    delivery_status text,
    parked_at       timestamptz,
    park_reason     text,
    CONSTRAINT kernel_event_outbox_key UNIQUE (source_id, event_id)
);

CREATE INDEX kernel_event_outbox_pending ON kernel_event_outbox (id)
    WHERE delivered_at IS NULL AND parked_at IS NULL;
CREATE INDEX kernel_event_outbox_delivered ON kernel_event_outbox (delivered_at)
    WHERE delivered_at IS NOT NULL;
CREATE INDEX kernel_event_outbox_parked ON kernel_event_outbox (parked_at)
    WHERE parked_at IS NOT NULL;

-- +goose Down
DROP TABLE kernel_event_outbox;
DROP TABLE journal_events;
