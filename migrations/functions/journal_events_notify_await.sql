-- journal_events_notify_await is the trigger function that announces a
-- journal row that may move a waiting run on the reckon_await channel
-- (kernel/runner.AwaitChannel), with the row's {"project", "run_id"}. The
-- notification goes out when the inserting transaction commits.
CREATE FUNCTION journal_events_notify_await() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('reckon_await', json_build_object('project', NEW.project, 'run_id', NEW.run_id)::text);
    RETURN NULL;
END $$;
