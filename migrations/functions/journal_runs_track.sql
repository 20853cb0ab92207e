-- journal_runs_track is the statement trigger function that keeps the runs
-- index (journal_runs) as the journal grows, whoever writes it (ingest,
-- the outbox's in-database delivery, COPY, a repair by hand): it adds the
-- runs whose first events the statement journaled (new_rows, the
-- transition table; a run already indexed costs one probe of the primary
-- key and writes nothing), then refreshes the runs whose lifecycle events
-- it journaled (journal_runs_refresh). A statement of tool events only
-- does nothing more.
--
-- first_ingested_at (migration 00080) is the run's oldest ingested_at:
-- every read of a run's or an operation's events is bounded below by it,
-- so that a partitioned journal reads only the partitions from the run's
-- first on. A writer whose transaction began earlier may commit after the
-- row was created by a later one; the UPDATE, a statement of its own and
-- so a new snapshot, lowers the bound to the writer's rows (no row is
-- written when it is already lower). TestRunBoundSeesEarlierTransaction.
-- Installed by 00055 and again by 00080, which adds the column: a schema
-- migrated to a version between them must not take events.
CREATE OR REPLACE FUNCTION journal_runs_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO journal_runs (project, run_id, source_id, started_at, first_ingested_at)
    SELECT DISTINCT ON (n.project, n.run_id) n.project, n.run_id, n.source_id, n.ts, n.ingested_at
    FROM new_rows n
    ORDER BY n.project, n.run_id, n.seq
    ON CONFLICT (project, run_id) DO NOTHING;

    UPDATE journal_runs r SET first_ingested_at = n.first
    FROM (SELECT n.project, n.run_id, min(n.ingested_at) AS first
          FROM new_rows n GROUP BY n.project, n.run_id) n
    WHERE r.project = n.project AND r.run_id = n.run_id AND r.first_ingested_at > n.first;

    PERFORM journal_runs_refresh(array_agg(l.project), array_agg(l.run_id))
    FROM (SELECT DISTINCT n.project, n.run_id FROM new_rows n
          WHERE n.type IN ('run.started', 'run.completed', 'run.failed', 'run.awaiting', 'run.resumed')) l
    HAVING count(*) > 0;
    RETURN NULL;
END $$;
