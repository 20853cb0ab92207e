-- The journal's indexes (journal_events), as migration 00080 creates them
-- on the partitioned table and its Down on the table made flat again: each
-- index was introduced by an earlier migration, which says what reads it
-- serves (00001, 00020, 00023, 00040, 00055, 00060).
CREATE INDEX journal_events_run ON journal_events (project, run_id, seq);
CREATE INDEX journal_events_type_ts ON journal_events (project, type, ts);
CREATE INDEX journal_events_operation ON journal_events (project, run_id, operation_id)
    WHERE operation_id IS NOT NULL;
CREATE INDEX journal_events_open_ops ON journal_events (project, ts, seq)
    WHERE type = 'tool.started' AND open;
CREATE INDEX journal_events_run_lifecycle ON journal_events (project, run_id, type, seq)
    WHERE type IN ('run.started', 'run.completed', 'run.failed');
CREATE INDEX journal_events_supervisor_reconciled ON journal_events (project, ts, seq)
    WHERE type = 'operation.reconciled' AND actor = 'supervisor';
CREATE INDEX journal_events_awaiting ON journal_events (ts, seq)
    WHERE type = 'run.awaiting' AND source_id = 'kernel';
CREATE INDEX journal_events_run_waits ON journal_events (project, run_id, seq)
    WHERE type IN ('run.awaiting', 'run.resumed');
CREATE INDEX journal_events_effect_key ON journal_events
    (project, md5((data->'tool')::text || coalesce(data->'args', '{}'::jsonb)::text), seq)
    WHERE type = 'tool.started';
