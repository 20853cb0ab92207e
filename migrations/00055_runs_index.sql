-- +goose Up
-- The runs index (GET /v1/runs, docs/api.md#runs): one row per run the
-- journal holds, with what a list of runs is filtered and ordered by. It
-- is kept by the journal itself, in the transaction of every write
-- (journal_runs_track, a statement trigger), from the same facts GET
-- /v1/runs/{run_id} reads, so a page of runs costs an index range of the
-- page's size however long the journal's history. Operation counts are not
-- kept here: the listing counts them for the page's runs from the
-- journal's operation index, and no run's row is written for a tool event.
--
--   listed         the list's order (newest first): when the index first
--                  saw the run.
--   source_id      the source of the run's first journaled event (kernel
--                  for kernel runs and their child runs, the MCP gateway's
--                  source for its runs, the agent's otherwise).
--   status, started_at, ended_at, parent_run_id: see
--                  functions/journal_runs_refresh.sql.
CREATE TABLE journal_runs (
    project       text        NOT NULL,
    run_id        text        NOT NULL,
    listed        bigint      GENERATED ALWAYS AS IDENTITY,
    source_id     text        NOT NULL,
    status        text        NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'awaiting', 'completed', 'failed')),
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz,
    parent_run_id text,
    PRIMARY KEY (project, run_id)
);
CREATE INDEX journal_runs_listed ON journal_runs (project, listed);
CREATE INDEX journal_runs_status ON journal_runs (project, status, listed);
CREATE INDEX journal_runs_children ON journal_runs (project, parent_run_id, listed)
    WHERE parent_run_id IS NOT NULL;

-- A run's waits (run.awaiting, run.resumed), for the status of
-- journal_runs_refresh without reading the run's tool events: a handful
-- of rows per waiting run, nothing for any other.
CREATE INDEX journal_events_run_waits ON journal_events (project, run_id, seq)
    WHERE type IN ('run.awaiting', 'run.resumed');

-- +goose StatementBegin
-- +reckon include functions/journal_runs_refresh.sql
-- +goose StatementEnd
-- +goose StatementBegin
-- +reckon include functions/journal_runs_track.sql
-- +goose StatementEnd
CREATE TRIGGER journal_runs_track AFTER INSERT ON journal_events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION journal_runs_track();

-- The runs journaled before: the trigger above holds off every other
-- writer of the journal until this migration commits, so nothing is
-- missed in between. One pass over the journal, in journal order.
INSERT INTO journal_runs (project, run_id, source_id, started_at)
SELECT f.project, f.run_id, f.source_id, f.ts
FROM (SELECT DISTINCT ON (project, run_id) project, run_id, source_id, ts, seq
      FROM journal_events ORDER BY project, run_id, seq) f
ORDER BY f.seq;
SELECT journal_runs_refresh(array_agg(l.project), array_agg(l.run_id))
FROM (SELECT DISTINCT project, run_id FROM journal_events
      WHERE type IN ('run.started', 'run.completed', 'run.failed', 'run.awaiting', 'run.resumed')) l
HAVING count(*) > 0;

-- +goose Down
DROP TRIGGER journal_runs_track ON journal_events;
DROP FUNCTION journal_runs_track();
DROP FUNCTION journal_runs_refresh(text[], text[]);
DROP INDEX journal_events_run_waits;
DROP TABLE journal_runs;
