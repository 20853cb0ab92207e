-- +goose Up
-- The MCP gateway's source is the gateway's alone. Its source is not one of
-- reckon's reserved names (kernel, supervisor, operator…): an operator
-- chooses it (RECKON_GATEWAY_SOURCE, default mcp-gateway), and a token
-- could be named like it or granted it. Event keys are (source_id,
-- event_id), whatever the run, so such a token could write, into a run of
-- its own, an event under the gateway's source with the id the gateway
-- will give a call's tool.started later (<project>/<run>/op-<n>/started).
-- The gateway's own event then conflicts with it in the journal and is
-- parked: a call made upstream with its tool.started never journaled.
--
-- reckon_check_agent_events now first refuses (RK003) an agents' write
-- under the default gateway source or under any source a gateway instance
-- has registered with (gateway_instances, written as each gateway starts).
-- A custom source is protected from the first start of a gateway using it.
-- Same name and signature: API processes of the version before call it
-- and are protected too.
CREATE INDEX gateway_instances_source ON gateway_instances (source_id);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reckon_check_agent_events(guarded_projects text[], guarded_run_ids text[],
    projects text[], run_ids text[], sources text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p text;
    r text;
    s text;
    owner text;
BEGIN
    SELECT c.source_id INTO s FROM unnest(sources) AS c(source_id)
    WHERE c.source_id = 'mcp-gateway'
       OR EXISTS (SELECT 1 FROM gateway_instances g WHERE g.source_id = c.source_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'source "%" is the MCP gateway''s (reckon mcp-gateway writes its events under it); only the gateway writes under it — write under a source of your own', s
            USING ERRCODE = 'RK003';
    END IF;
    PERFORM reckon_refuse_kernel_runs(guarded_projects, guarded_run_ids);
    FOR p, r, s IN
        SELECT c.project, c.run_id, c.source_id
        FROM unnest(projects, run_ids, sources) WITH ORDINALITY AS c(project, run_id, source_id, n)
        ORDER BY c.n
    LOOP
        SELECT a.source_id INTO owner FROM agent_runs a WHERE a.project = p AND a.run_id = r;
        IF NOT FOUND THEN
            -- A concurrent first write of the same run waits here for the
            -- other's commit (the primary key), then does nothing; the
            -- owner is read again below, in a statement of its own.
            INSERT INTO agent_runs (project, run_id, source_id)
            VALUES (p, r, coalesce(
                (SELECT j.source_id FROM journal_events j
                 WHERE j.project = p AND j.run_id = r ORDER BY j.seq LIMIT 1), s))
            ON CONFLICT (project, run_id) DO NOTHING;
            SELECT a.source_id INTO owner FROM agent_runs a WHERE a.project = p AND a.run_id = r;
        END IF;
        IF owner <> s THEN
            RAISE EXCEPTION 'run "%" of project "%" belongs to source "%" (the source of its first event), and only that source writes its events; got an event of source "%" — report this run''s operations under a run id of your own', r, p, owner, s
                USING ERRCODE = 'RK002';
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reckon_check_agent_events(guarded_projects text[], guarded_run_ids text[],
    projects text[], run_ids text[], sources text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p text;
    r text;
    s text;
    owner text;
BEGIN
    PERFORM reckon_refuse_kernel_runs(guarded_projects, guarded_run_ids);
    FOR p, r, s IN
        SELECT c.project, c.run_id, c.source_id
        FROM unnest(projects, run_ids, sources) WITH ORDINALITY AS c(project, run_id, source_id, n)
        ORDER BY c.n
    LOOP
        SELECT a.source_id INTO owner FROM agent_runs a WHERE a.project = p AND a.run_id = r;
        IF NOT FOUND THEN
            -- A concurrent first write of the same run waits here for the
            -- other's commit (the primary key), then does nothing; the
            -- owner is read again below, in a statement of its own.
            INSERT INTO agent_runs (project, run_id, source_id)
            VALUES (p, r, coalesce(
                (SELECT j.source_id FROM journal_events j
                 WHERE j.project = p AND j.run_id = r ORDER BY j.seq LIMIT 1), s))
            ON CONFLICT (project, run_id) DO NOTHING;
            SELECT a.source_id INTO owner FROM agent_runs a WHERE a.project = p AND a.run_id = r;
        END IF;
        IF owner <> s THEN
            RAISE EXCEPTION 'run "%" of project "%" belongs to source "%" (the source of its first event), and only that source writes its events; got an event of source "%" — report this run''s operations under a run id of your own', r, p, owner, s
                USING ERRCODE = 'RK002';
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP INDEX gateway_instances_source;
