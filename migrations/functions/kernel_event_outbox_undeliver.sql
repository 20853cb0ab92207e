-- kernel_event_outbox_undeliver is the statement trigger function that
-- makes every outbox row an INSERT writes pending: one row of
-- kernel_event_outbox_undelivered per new row (new_rows, the transition
-- table), naming the operation the journal will store for it — the
-- prepared operation_id, or the event's own data for a row inserted
-- without the prepared columns (settles NULL).
CREATE FUNCTION kernel_event_outbox_undeliver() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO kernel_event_outbox_undelivered (id, project, run_id, operation_id)
    SELECT id, event->>'project', event->>'run_id', CASE WHEN settles IS NULL THEN event->'data'->>'operation_id' ELSE operation_id END
    FROM new_rows;
    RETURN NULL;
END $$;
