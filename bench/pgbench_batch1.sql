-- One transaction = one event: its key row (ON CONFLICT DO NOTHING), then
-- the event if the key was new.
\set b random(1, 1000000000)
WITH k AS (
    INSERT INTO pgbench_ref.keys (source_id, event_id, project, run_id, seq, payload_digest)
    VALUES ('bench1', :b || '-' || random(), 'bench', 'run-1', nextval('pgbench_ref.seq'), sha256('x'))
    ON CONFLICT (source_id, event_id) DO NOTHING
    RETURNING source_id, event_id, run_id, seq, payload_digest)
INSERT INTO pgbench_ref.events (seq, source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id, settles, open)
SELECT k.seq, k.source_id, k.event_id, 'bench', k.run_id, 'tool.started', now(), 'agent',
       '{"operation_id":"op-1","tool":"run_command","args":{"command":"echo 1 > f"}}', k.payload_digest, 'op-1', false, true
FROM k;
