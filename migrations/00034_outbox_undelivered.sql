-- +goose Up
-- An outbox row's pending state moves out of the row into a narrow table
-- of its own: a row is on its way to the journal exactly while it has a
-- row in kernel_event_outbox_undelivered. A trigger inserts it with the
-- outbox row, whoever inserts that (Enqueue, an earlier version's Enqueue,
-- a repair by hand), once per statement; delivery deletes the narrow row in the transaction that
-- writes the journal (or, for a journal elsewhere, right after its
-- answer), where it used to update the outbox row.
--
-- Why: the delivered mark was an UPDATE of delivered_at, a column two
-- partial indexes named in their predicates, so it could never be a HOT
-- update. Each delivery wrote a second full copy of the row (its event
-- included) and three index entries, and left the old copy for vacuum, a
-- large share of the enqueue → delivered path's statement time. Deleting
-- a row of four short columns writes neither.
--
-- What it changes for a reader of the table:
--   * pending: a row of kernel_event_outbox_undelivered (its id);
--   * parked: parked_at set, as before (the narrow row is deleted);
--   * delivered: neither. delivered_at and delivery_status stay as they
--     were on rows delivered before this migration and are no longer set:
--     the journal's row under the same key is the record of delivery, with
--     its own time. last_error keeps the last failure of a row that was
--     retried before it was delivered.
-- Rows are pruned by created_at now (kernel_event_outbox_created): a
-- delivered row older than the retention, counted from its enqueue.
--
-- Processes of an earlier version should be stopped before this migration.
-- Its publishers would read every row delivered after it as undelivered
-- and deliver it again (the journal would answer repeated: nothing lost or
-- duplicated, but a day of retention delivered twice), so the outbox's
-- next_attempt_at, which only their claim reads, is dropped (it lives in
-- kernel_event_outbox_undelivered now): their claim then fails with
-- "column does not exist" and they back off, while an earlier version's
-- Enqueue, which names no such column, goes on working (the trigger makes
-- its rows pending).
CREATE TABLE kernel_event_outbox_undelivered (
    id              bigint      PRIMARY KEY,
    project         text,
    run_id          text,
    operation_id    text,
    next_attempt_at timestamptz NOT NULL DEFAULT now()
);

-- +goose StatementBegin
-- +reckon include functions/kernel_event_outbox_undeliver.sql
-- +goose StatementEnd
-- The operation is the one the journal will store for the row: the
-- prepared column (Prepare reads data's operation_id by its exact name,
-- and only as a string), so that a read of an operation's pending events
-- finds what Event.OperationID and the journal's column say is the
-- operation's; the event's own data only for a row inserted without the
-- prepared columns (settles NULL: by hand, or enqueued before migration
-- 00027), which the publisher delivers the checked way.
-- A statement trigger with a transition table, not a row trigger: one
-- call for an Enqueue of a hundred events, not a hundred (a key already
-- enqueued inserts no row, so is not in new_rows).
CREATE TRIGGER kernel_event_outbox_undeliver AFTER INSERT ON kernel_event_outbox
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION kernel_event_outbox_undeliver();

-- The reads by the event's project, run and operation (the reconcile
-- rules, the triage guard, WaitDelivered), as kernel_event_outbox_pending_ops
-- served them from the outbox.
CREATE INDEX kernel_event_outbox_undelivered_run ON kernel_event_outbox_undelivered
    (project, run_id, operation_id);

INSERT INTO kernel_event_outbox_undelivered (id, project, run_id, operation_id, next_attempt_at)
SELECT id, event->>'project', event->>'run_id',
    CASE WHEN settles IS NULL THEN event->'data'->>'operation_id' ELSE operation_id END, next_attempt_at
FROM kernel_event_outbox
WHERE delivered_at IS NULL AND parked_at IS NULL;

CREATE INDEX kernel_event_outbox_created ON kernel_event_outbox (created_at);

DROP INDEX kernel_event_outbox_pending;
DROP INDEX kernel_event_outbox_pending_ops;
DROP INDEX kernel_event_outbox_delivered;
ALTER TABLE kernel_event_outbox DROP COLUMN next_attempt_at;

-- +goose Down
-- A stable default: no rewrite of the table.
ALTER TABLE kernel_event_outbox ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now();
UPDATE kernel_event_outbox o SET next_attempt_at = u.next_attempt_at
FROM kernel_event_outbox_undelivered u WHERE u.id = o.id;
CREATE INDEX kernel_event_outbox_pending ON kernel_event_outbox (id)
    WHERE delivered_at IS NULL AND parked_at IS NULL;
CREATE INDEX kernel_event_outbox_pending_ops ON kernel_event_outbox
    ((event->>'project'), (event->>'run_id'), (event->'data'->>'operation_id'))
    WHERE delivered_at IS NULL AND parked_at IS NULL;
CREATE INDEX kernel_event_outbox_delivered ON kernel_event_outbox (delivered_at)
    WHERE delivered_at IS NOT NULL;
-- Rows delivered since the Up: mark them delivered, as of their enqueue
-- (their delivery time was not kept), so the earlier version prunes them.
UPDATE kernel_event_outbox o SET delivered_at = o.created_at
WHERE o.delivered_at IS NULL AND o.parked_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM kernel_event_outbox_undelivered u WHERE u.id = o.id);
DROP INDEX kernel_event_outbox_created;
DROP TRIGGER kernel_event_outbox_undeliver ON kernel_event_outbox;
DROP FUNCTION kernel_event_outbox_undeliver();
DROP TABLE kernel_event_outbox_undelivered;
