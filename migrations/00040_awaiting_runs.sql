-- +goose Up
-- Runs that wait for a settlement (a plan step's on_uncertain: await).
-- The resumer (kernel/runner.Resumer) reads the kernel's waits begun within
-- the await bound from this partial index, so its cost follows recent
-- waits, not journal history.
CREATE INDEX journal_events_awaiting ON journal_events (ts, seq)
    WHERE type = 'run.awaiting' AND source_id = 'kernel';

-- The journal says at once when it takes an event that may move a waiting
-- run: a kernel run.awaiting (the run asks for a triage of itself) or a
-- probe's or an operator's reconciliation (it may resume a run). A
-- notification goes out when its transaction commits, so the listener finds
-- the event in the journal; it is only a nudge (lost while nobody listens),
-- which the resumer's periodic scan makes up for. Every writer reaches the
-- journal (the publisher, the reconcile endpoint and the sweep through the
-- outbox), so nobody has to remember to notify. A row trigger with a WHEN
-- clause: for every other row the condition is all it costs.
-- +goose StatementBegin
-- +reckon include functions/journal_events_notify_await.sql
-- +goose StatementEnd
CREATE TRIGGER journal_events_notify_await AFTER INSERT ON journal_events
    FOR EACH ROW
    WHEN (NEW.source_id = 'kernel' AND (NEW.type = 'run.awaiting'
          OR (NEW.type = 'operation.reconciled' AND NEW.data->>'basis' IN ('probe', 'operator'))))
    EXECUTE FUNCTION journal_events_notify_await();

-- +goose Down
DROP TRIGGER journal_events_notify_await ON journal_events;
DROP FUNCTION journal_events_notify_await();
DROP INDEX journal_events_awaiting;
