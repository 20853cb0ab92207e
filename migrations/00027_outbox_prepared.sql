-- +goose Up
-- What the journal needs of an outbox row besides its event, computed once
-- at enqueue (kernel.Event.Prepare): the operation it names, whether it
-- settles that operation, and its time as the journal stores it. With them
-- the in-process publisher writes claimed rows into journal_events inside
-- the database (one INSERT … SELECT) instead of reading each event out,
-- decoding, validating and sending it back. Rows enqueued before this
-- migration have NULL here and are delivered the old way; no backfill.
-- Nullable columns without a default: adding them rewrites nothing.
ALTER TABLE kernel_event_outbox
    ADD COLUMN operation_id text,
    ADD COLUMN settles boolean,
    ADD COLUMN ts timestamptz;

-- The copy trusts those columns and the event because Enqueue validated
-- them together. An UPDATE that changes the event or them afterwards
-- (nothing in reckon does; a repair by hand, a bug) takes that trust
-- away: it clears settles, and the publisher then sends the row the
-- checked way (decoded, validated, parked if the journal refuses it), as
-- it does rows from before this migration. Only UPDATEs naming these
-- columns fire it, so delivery marks pay nothing.
-- +goose StatementBegin
-- +reckon include functions/kernel_event_outbox_unprepare.sql
-- +goose StatementEnd
CREATE TRIGGER kernel_event_outbox_unprepare
    BEFORE UPDATE OF event, payload_digest, operation_id, settles, ts ON kernel_event_outbox
    FOR EACH ROW EXECUTE FUNCTION kernel_event_outbox_unprepare();

-- +goose Down
DROP TRIGGER kernel_event_outbox_unprepare ON kernel_event_outbox;
DROP FUNCTION kernel_event_outbox_unprepare();
ALTER TABLE kernel_event_outbox
    DROP COLUMN ts,
    DROP COLUMN settles,
    DROP COLUMN operation_id;
