-- +goose Up
-- An agent's run belonged to the source of its first event per exact run
-- id (migration 00030), so the child runs of an agent's run were anyone's:
-- for agent A's run R, agent B could write into "R.op-1" -- the id
-- kernel.ChildRunID gives the child of A's delegate operation op-1 -- and
-- the listing's count of that child's operations (child_summary, the
-- console's "N of M unresolved") was then made up by B. Kernel and gateway
-- runs protect their child runs already (reckon_refuse_kernel_runs).
--
-- reckon_check_agent_events now gives a run that nobody owns itself to the
-- owner of its nearest owned ancestor (every prefix of its id ending before
-- a "."): an agent_runs row, or for a run journaled before migration 00030
-- the source of its first event. Another source's event there is refused
-- (RK002); the owner's is written and records the child as the owner's
-- (an agent_runs row). A run whose ancestors nobody owns is claimed by its
-- first event's source as before, and a run that already has an owner of
-- its own (a row, or a first event journaled before migration 00030)
-- keeps it: nothing journaled is rewritten or hidden. The ingest endpoint
-- applies the same rule first (kernel/operations Owners.RunWriters,
-- kernel/httpapi writersRefused) for the precise refusal; this check, in
-- the write's transaction, catches a claim committed in between.
-- Same name and signature: API processes of the version before call it and
-- are protected too.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reckon_check_agent_events(guarded_projects text[], guarded_run_ids text[],
    projects text[], run_ids text[], sources text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p text;
    r text;
    s text;
    owner text;
    parent text;
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
        parent := NULL;
        SELECT a.source_id INTO owner FROM agent_runs a WHERE a.project = p AND a.run_id = r;
        IF NOT FOUND THEN
            -- Nobody has claimed the run: its first journaled event's
            -- source (a run journaled before migration 00030), else the
            -- owner of its nearest owned ancestor (an agent_runs row, or
            -- such a first event), else this event's source.
            owner := (SELECT j.source_id FROM journal_events j
                      WHERE j.project = p AND j.run_id = r ORDER BY j.seq LIMIT 1);
            IF owner IS NULL THEN
                SELECT d.run_id, d.source_id INTO parent, owner
                FROM generate_series(length(r), 2, -1) AS g(i)
                CROSS JOIN LATERAL (SELECT left(r, g.i - 1) AS run_id) AS c
                CROSS JOIN LATERAL (
                    SELECT c.run_id, coalesce(
                        (SELECT a.source_id FROM agent_runs a WHERE a.project = p AND a.run_id = c.run_id),
                        (SELECT j.source_id FROM journal_events j
                         WHERE j.project = p AND j.run_id = c.run_id ORDER BY j.seq LIMIT 1)) AS source_id
                ) AS d
                WHERE substr(r, g.i, 1) = '.' AND d.source_id IS NOT NULL
                ORDER BY g.i DESC
                LIMIT 1;
            END IF;
            -- A concurrent first write of the same run waits here for the
            -- other's commit (the primary key), then does nothing; the
            -- owner is read again below, in a statement of its own.
            INSERT INTO agent_runs (project, run_id, source_id)
            VALUES (p, r, coalesce(owner, s))
            ON CONFLICT (project, run_id) DO NOTHING;
            SELECT a.source_id INTO owner FROM agent_runs a WHERE a.project = p AND a.run_id = r;
        END IF;
        IF owner <> s AND parent IS NOT NULL THEN
            RAISE EXCEPTION 'run "%" of project "%" is a child run of run "%", which belongs to source "%" (the source of its first event), and only that source writes the events of that run and of its child runs; got an event of source "%" — report this run''s operations under a run id of your own', r, p, parent, owner, s
                USING ERRCODE = 'RK002';
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
