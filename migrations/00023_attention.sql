-- +goose Up
-- The operator's queue (GET /v1/agent/operations/attention) reads the
-- supervisor's reconciliations inside the listing window: this partial index
-- holds only those rows, so the queue's cost follows the supervisor's recent
-- verdicts, not journal history.
CREATE INDEX journal_events_supervisor_reconciled ON journal_events (project, ts, seq)
    WHERE type = 'operation.reconciled' AND actor = 'supervisor';

-- +goose Down
DROP INDEX journal_events_supervisor_reconciled;
