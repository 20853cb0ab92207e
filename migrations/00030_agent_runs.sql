-- +goose Up
-- Runs that agents report themselves (POST /v1/events, outside kernel and
-- gateway runs) belong to one source: the source of the run's first event.
-- Operations match by (project, run_id, operation_id) whatever the source
-- (docs/design.md), so without an owner a second agent's token could post a
-- tool.completed or a tool.failed effect=none into another agent's run
-- and settle its uncertain operation, each event under its own source.
--
-- agent_runs records the owner. The first guarded write into a run claims
-- it for its event's source (the source of the run's earliest journaled
-- event, for a run journaled before this migration); the primary key makes
-- concurrent first writes take turns, so exactly one source wins. Kernel
-- and gateway runs never get a row: the ingest refuses them before this.
CREATE TABLE agent_runs (
    project    text NOT NULL,
    run_id     text NOT NULL,
    source_id  text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, run_id)
);

-- reckon_check_agent_events(guarded_projects, guarded_run_ids, projects,
-- run_ids, sources) is the whole check of an agents' write, in one
-- statement ahead of its insert and in its transaction (so a refusal
-- writes nothing of the call): first reckon_refuse_kernel_runs over the
-- guarded pairs (the events' runs and every run they descend from), then,
-- for each entry of the other three arrays (one per run and source, in the
-- order of the events), it claims the run for the source when it has no
-- owner yet (so the write's first event of a new run claims it), and
-- raises RK002 when the run belongs to another source. One statement
-- rather than two: single events under group commit pay a statement's
-- overhead per round trip.
-- +goose StatementBegin
CREATE FUNCTION reckon_check_agent_events(guarded_projects text[], guarded_run_ids text[],
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

-- +goose Down
DROP FUNCTION reckon_check_agent_events(text[], text[], text[], text[], text[]);
DROP TABLE agent_runs;
