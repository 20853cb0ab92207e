-- journal_runs_track is the statement trigger function that keeps the runs
-- index (journal_runs) as the journal grows, whoever writes it (ingest,
-- the outbox's in-database delivery, COPY, a repair by hand): it adds the
-- runs whose first events the statement journaled (new_rows, the
-- transition table; a run already indexed costs one probe of the primary
-- key and writes nothing), then refreshes the runs whose lifecycle events
-- it journaled (journal_runs_refresh). A statement of tool events only
-- does nothing more.
--
-- first_ingested_at and ingested_before (migration 00080) bound the
-- run's events: the oldest ingested_at, and the end of the week (Monday
-- 00:00 UTC, as the journal's partitions and reckon_week_after; written
-- out here, so that the function needs nothing 00055 does not install)
-- of the newest. Every read of a
-- run's or an operation's events is bounded by them (kernel/journal
-- RunBound), so that a partitioned journal reads only the partitions of
-- the run's weeks. The UPDATE writes the row only when the statement's
-- rows lie outside the bounds: once a week at most for a run that goes on,
-- and when a writer whose transaction began earlier commits after the row
-- was created by a later one (a statement of its own, so a new snapshot,
-- sees that row). TestRunBoundSeesEarlierTransaction.
-- Installed by 00055 and again by 00080, which adds the columns: a schema
-- migrated to a version between them must not take events.
CREATE OR REPLACE FUNCTION journal_runs_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO journal_runs (project, run_id, source_id, started_at, first_ingested_at, ingested_before)
    SELECT DISTINCT ON (n.project, n.run_id) n.project, n.run_id, n.source_id, n.ts, n.ingested_at,
        (date_trunc('week', n.ingested_at AT TIME ZONE 'UTC') + interval '7 days') AT TIME ZONE 'UTC'
    FROM new_rows n
    ORDER BY n.project, n.run_id, n.seq
    ON CONFLICT (project, run_id) DO NOTHING;

    UPDATE journal_runs r
    SET first_ingested_at = least(r.first_ingested_at, n.first),
        ingested_before = greatest(r.ingested_before, n.before)
    FROM (SELECT n.project, n.run_id, min(n.ingested_at) AS first, max(n.ingested_at) AS last,
                 (date_trunc('week', max(n.ingested_at) AT TIME ZONE 'UTC') + interval '7 days') AT TIME ZONE 'UTC' AS before
          FROM new_rows n GROUP BY n.project, n.run_id) n
    WHERE r.project = n.project AND r.run_id = n.run_id
      AND (r.first_ingested_at > n.first OR r.ingested_before <= n.last);

    PERFORM journal_runs_refresh(array_agg(l.project), array_agg(l.run_id))
    FROM (SELECT DISTINCT n.project, n.run_id FROM new_rows n
          WHERE n.type IN ('run.started', 'run.completed', 'run.failed', 'run.awaiting', 'run.resumed')) l
    HAVING count(*) > 0;
    RETURN NULL;
END $$;
