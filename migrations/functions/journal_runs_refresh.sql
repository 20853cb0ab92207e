-- journal_runs_refresh(projects, run_ids) reads again, from the journal,
-- what the runs index (journal_runs) keeps of each run's lifecycle: its
-- status, when it started and ended, and its parent. In order:
--
--   * the runs' rows are locked, in key order, so that two writers of one
--     run's lifecycle events take turns (and two writers of several runs
--     cannot deadlock on them);
--   * then, in a statement of its own (a new snapshot under READ
--     COMMITTED), each run's facts are read from the journal: every event
--     committed before the lock was granted is seen, so the last writer to
--     commit leaves what the journal says, whatever the order the events
--     came in.
--
-- The facts, all read from partial indexes of lifecycle events, never from
-- a run's tool events:
--   status     completed or failed after the newest run.completed or
--              run.failed (journal order); else awaiting while a kernel
--              run.awaiting has no kernel run.resumed of its operation;
--              else running.
--   started_at the ts of the run's first run.started, else (a run that has
--              none) the ts of its first event, as the row was created.
--   ended_at   the ts of that newest terminal event.
--   parent_run_id  data.parent_run_id of the first run.started, when the
--              run's id descends from it (<parent>.<...>): the ownership
--              rules (reckon_check_agent_events, reckon_refuse_kernel_runs)
--              give such a run its parent's writer, so nobody can hang a
--              run of their own under somebody else's.
CREATE FUNCTION journal_runs_refresh(projects text[], run_ids text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM journal_runs r
    WHERE (r.project, r.run_id) IN (SELECT * FROM unnest(projects, run_ids))
    ORDER BY r.project, r.run_id
    FOR UPDATE OF r;

    UPDATE journal_runs r
    SET status = CASE
            WHEN en.type = 'run.completed' THEN 'completed'
            WHEN en.type = 'run.failed' THEN 'failed'
            WHEN EXISTS (
                SELECT 1 FROM journal_events a
                WHERE a.project = c.project AND a.run_id = c.run_id
                  AND a.type = 'run.awaiting' AND a.source_id = 'kernel'
                  AND NOT EXISTS (
                      SELECT 1 FROM journal_events m
                      WHERE m.project = a.project AND m.run_id = a.run_id
                        AND m.type = 'run.resumed' AND m.source_id = 'kernel'
                        AND m.operation_id = a.operation_id)) THEN 'awaiting'
            ELSE 'running' END,
        started_at = coalesce(st.ts, r.started_at),
        ended_at = en.ts,
        parent_run_id = CASE WHEN st.parent <> '' AND starts_with(c.run_id, st.parent || '.') THEN st.parent END
    FROM (SELECT DISTINCT * FROM unnest(projects, run_ids)) AS c(project, run_id)
    LEFT JOIN LATERAL (
        SELECT s.ts, s.data->>'parent_run_id' AS parent
        FROM journal_events s
        WHERE s.project = c.project AND s.run_id = c.run_id AND s.type = 'run.started'
        ORDER BY s.seq
        LIMIT 1) st ON true
    LEFT JOIN LATERAL (
        SELECT e.type, e.ts
        FROM journal_events e
        WHERE e.project = c.project AND e.run_id = c.run_id
          AND e.type IN ('run.completed', 'run.failed')
        ORDER BY e.seq DESC
        LIMIT 1) en ON true
    WHERE r.project = c.project AND r.run_id = c.run_id;
END
$$;
