-- reckon_refuse_kernel_runs(projects, run_ids) raises SQLSTATE RK001
-- (journal.recordedRunCode) when one of the runs (project, run_id) given
-- pairwise is reckon's own record: a kernel run (kernel_runs, started
-- through POST /v1/runs) or a run of the MCP gateway (gateway_runs). Only
-- reckon writes the events of those runs and of their child runs, so the
-- ingest calls it (through reckon_check_agent_events) in the transaction of
-- the journal insert, with each event's run and every run it descends from.
--
-- A run's start and the gateway's claim of a run id hold the run's advisory
-- lock exclusively while they check the run for others' events and record
-- it (runner's lockRunStartSQL, the gateway's claimRunKeySQL: the same key).
-- This function takes that lock shared for the rest of the transaction
-- before it looks, so either the start sees the events or the events see
-- the start's row. It tries the lock rather than wait for it: a run being
-- started is refused like a kernel run, instead of holding the write (and,
-- under group commit, the other events of its transaction) for as long as
-- the start takes.
CREATE OR REPLACE FUNCTION reckon_refuse_kernel_runs(projects text[], run_ids text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p text;
    r text;
BEGIN
    FOR p, r IN
        SELECT DISTINCT c.project, c.run_id FROM unnest(projects, run_ids) AS c(project, run_id)
    LOOP
        IF NOT pg_try_advisory_xact_lock_shared(hashtextextended(p || '/' || r, 0)) THEN
            RAISE EXCEPTION 'run "%" of project "%" is being started through POST /v1/runs or claimed by the MCP gateway at this moment; only reckon writes the events of the runs it records and of their child runs', r, p
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
    SELECT g.project, g.run_id INTO p, r
    FROM unnest(projects, run_ids) AS c(project, run_id)
    JOIN gateway_runs g ON g.project = c.project AND g.run_id = c.run_id
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'run "%" of project "%" is a run of the MCP gateway (reckon mcp-gateway); only the gateway writes its events and those of its child runs', r, p
            USING ERRCODE = 'RK001';
    END IF;
END
$$;
