-- One transaction = one batch of 100 events (the shape of the outbox
-- benchmark's writers: a run's worth per commit): the key rows (ON
-- CONFLICT DO NOTHING), then the events whose keys were new.
\set b random(1, 1000000000)
WITH k AS (
    INSERT INTO pgbench_ref.keys (source_id, event_id, project, run_id, seq, payload_digest)
    SELECT 'bench', :b || '-' || random() || '-' || g, 'bench', 'run-' || (g / 100), nextval('pgbench_ref.seq'),
           sha256(convert_to(:b || '-' || g, 'UTF8'))
    FROM generate_series(1, 100) g
    ON CONFLICT (source_id, event_id) DO NOTHING
    RETURNING source_id, event_id, run_id, seq, payload_digest)
INSERT INTO pgbench_ref.events (seq, source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id, settles, open)
SELECT k.seq, k.source_id, k.event_id, 'bench', k.run_id, 'tool.started', now(), 'agent',
       jsonb_build_object('operation_id', 'op-' || k.seq, 'tool', 'run_command', 'args', jsonb_build_object('command', 'echo ' || k.seq || ' > f')),
       k.payload_digest, 'op-' || k.seq, false, true
FROM k;
