-- +goose Up
-- The ingest endpoint refuses events in kernel runs (only the kernel writes
-- those) by looking kernel_runs up before it writes; a run started in
-- between was not caught, and a caller who knew the run id about to be
-- started could have its events read as the kernel's. This function,
-- called in the same transaction as the journal insert, closes that: it
-- takes a shared transaction-level advisory lock on the key of every
-- (project, run_id) given -- each event's run and every run its id
-- descends from -- which a run's start holds exclusively while it checks
-- the run for foreign events and records it (runner's lockRunStartSQL,
-- the same key), then raises if any of them is a kernel run. Either the
-- start sees the events, or the events see the start's row.
--
-- It does not wait for a start under way: the lock is tried, and a run
-- being started is refused like a kernel run. Waiting would hold the
-- write -- and, under group commit, other callers' events sharing its
-- transaction -- for as long as the start takes (a Temporal outage makes
-- that long); a start's lock is the kernel claiming the id.
-- SQLSTATE RK001 (journal.kernelRunCode).
-- +goose StatementBegin
CREATE FUNCTION reckon_refuse_kernel_runs(projects text[], run_ids text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p text;
    r text;
BEGIN
    FOR p, r IN
        SELECT DISTINCT c.project, c.run_id FROM unnest(projects, run_ids) AS c(project, run_id)
    LOOP
        IF NOT pg_try_advisory_xact_lock_shared(hashtextextended(p || '/' || r, 0)) THEN
            RAISE EXCEPTION 'run "%" of project "%" is being started through POST /v1/runs at this moment; only the kernel writes the events of a kernel run and of its child runs', r, p
                USING ERRCODE = 'RK001';
        END IF;
    END LOOP;
    SELECT k.project, k.run_id INTO p, r
    FROM unnest(projects, run_ids) AS c(project, run_id)
    JOIN kernel_runs k ON k.project = c.project AND k.run_id = c.run_id
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'run "%" of project "%" is a kernel run (started through POST /v1/runs); only the kernel writes its events and those of its child runs', r, p
            USING ERRCODE = 'RK001';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION reckon_refuse_kernel_runs(text[], text[]);
