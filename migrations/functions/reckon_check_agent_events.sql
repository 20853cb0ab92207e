-- reckon_check_agent_events(guarded_projects, guarded_run_ids, projects,
-- run_ids, sources) is the whole check of an agents' write (POST
-- /v1/events), one statement ahead of its insert and in its transaction,
-- so a refusal writes nothing of the call. In order:
--
--   * RK003 when one of the sources is the MCP gateway's: its default name,
--     or one a gateway instance registered with (gateway_instances). Event
--     keys are (source_id, event_id) whatever the run, so an event under
--     the gateway's source could take the id of the gateway's own event.
--   * reckon_refuse_kernel_runs over the guarded pairs (the events' runs
--     and every run they descend from): RK001 for reckon's own runs.
--   * For each (project, run_id, source) entry, in the order of the events:
--     the run's owner (agent_runs). A run nobody has claimed belongs to the
--     source of its first journaled event (a run journaled before agent_runs
--     existed), else to the owner of its nearest owned ancestor (every
--     prefix of its id ending before a "."), else to this event's source;
--     the entry records that owner. RK002 when the owner is another source.
--
-- The primary key of agent_runs makes concurrent first writes of one run
-- take turns, so exactly one source wins; nothing journaled is rewritten.
-- The ingest endpoint applies the same ownership rule first
-- (kernel.RunOwners) for the precise refusal; this check catches a claim
-- committed in between.
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
