-- kernel_event_outbox_unprepare is the trigger function that clears an
-- outbox row's settles when an UPDATE changes its event or its prepared
-- columns: the publisher then delivers the row the checked way (decoded,
-- validated, parked if the journal refuses it) instead of copying it into
-- the journal on the trust of columns Enqueue validated together.
CREATE FUNCTION kernel_event_outbox_unprepare() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.settles := NULL;
    RETURN NEW;
END $$;
