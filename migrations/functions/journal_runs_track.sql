-- journal_runs_track is the statement trigger function that keeps the runs
-- index (journal_runs) as the journal grows, whoever writes it (ingest,
-- the outbox's in-database delivery, COPY, a repair by hand): it adds the
-- runs whose first events the statement journaled (new_rows, the
-- transition table; a run already indexed costs one probe of the primary
-- key and writes nothing), then refreshes the runs whose lifecycle events
-- it journaled (journal_runs_refresh). A statement of tool events only
-- does nothing more.
CREATE FUNCTION journal_runs_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO journal_runs (project, run_id, source_id, started_at)
    SELECT DISTINCT ON (n.project, n.run_id) n.project, n.run_id, n.source_id, n.ts
    FROM new_rows n
    ORDER BY n.project, n.run_id, n.seq
    ON CONFLICT (project, run_id) DO NOTHING;

    PERFORM journal_runs_refresh(array_agg(l.project), array_agg(l.run_id))
    FROM (SELECT DISTINCT n.project, n.run_id FROM new_rows n
          WHERE n.type IN ('run.started', 'run.completed', 'run.failed', 'run.awaiting', 'run.resumed')) l
    HAVING count(*) > 0;
    RETURN NULL;
END $$;
