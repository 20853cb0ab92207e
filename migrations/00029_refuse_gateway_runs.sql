-- +goose Up
-- The MCP gateway's runs are reckon's own record, like kernel runs: the
-- gateway writes every event of a gateway run (its run.started, one
-- tool.started before each upstream call, the call's end). Migration 00028
-- refused agents' events (POST /v1/events) in kernel runs only, so any
-- agent token could post a tool.completed into a gateway run and settle
-- an operation whose effect nobody knows, or a run.failed that ends it.
-- reckon_refuse_kernel_runs now also refuses gateway runs (gateway_runs,
-- migration 00022) and the runs beneath them.
--
-- The gateway claims a new run id under the same advisory lock as a
-- kernel run's start (held for the claim's transaction, exclusively; see
-- kernel/gateway's claimRunKeySQL), and checks the run for others' events
-- only after taking it: an ingest under way holds the lock shared until it
-- commits, so the claim then sees its events and refuses the run id, and
-- an ingest tried during a claim is refused here.
--
-- Same name and signature as before, so that API processes of the version
-- before keep working against an upgraded database (and are protected by
-- it) while a fleet upgrades.
-- +goose StatementBegin
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
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
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
