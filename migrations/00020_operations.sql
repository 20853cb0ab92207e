-- +goose Up
-- Indexes of the operations projection and of reconciliation.

-- Run lifecycle lookups (is this run still running according to the journal?
-- who started it?) read only a run's lifecycle events, however many tool
-- events the run has.
CREATE INDEX journal_events_run_lifecycle ON journal_events (project, run_id, type, seq)
    WHERE type IN ('run.started', 'run.completed', 'run.failed');

-- Reconciliation checks events still on their way to the journal: pending
-- outbox rows of one operation (a human verdict not yet published must
-- already protect the operation from the supervisor). Only undelivered rows
-- are indexed, so the index stays as small as the outbox backlog.
CREATE INDEX kernel_event_outbox_pending_ops ON kernel_event_outbox
    ((event->>'project'), (event->>'run_id'), (event->'data'->>'operation_id'))
    WHERE delivered_at IS NULL AND parked_at IS NULL;

-- +goose Down
DROP INDEX kernel_event_outbox_pending_ops;
DROP INDEX journal_events_run_lifecycle;
