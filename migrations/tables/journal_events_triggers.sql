-- The journal's triggers (journal_events), as migration 00080 creates them
-- on the partitioned table and its Down on the table made flat again:
-- the waiting runs' notification (00040) and the runs index (00055).
CREATE TRIGGER journal_events_notify_await AFTER INSERT ON journal_events
    FOR EACH ROW
    WHEN (NEW.source_id = 'kernel' AND (NEW.type = 'run.awaiting'
          OR (NEW.type = 'operation.reconciled' AND NEW.data->>'basis' IN ('probe', 'operator'))))
    EXECUTE FUNCTION journal_events_notify_await();
CREATE TRIGGER journal_runs_track AFTER INSERT ON journal_events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION journal_runs_track();
