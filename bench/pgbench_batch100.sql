-- One transaction = one batch of 100 events, INSERT ... ON CONFLICT DO NOTHING
-- (the shape of the outbox benchmark's writers: a run's worth per commit).
\set b random(1, 1000000000)
INSERT INTO pgbench_ref.events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id, settles, open)
SELECT 'bench', :b || '-' || random() || '-' || g, 'bench', 'run-' || (g / 100), 'tool.started', now(), 'agent',
       jsonb_build_object('operation_id', 'op-' || g, 'tool', 'run_command', 'args', jsonb_build_object('command', 'echo ' || g || ' > f')),
       sha256(convert_to(:b || '-' || g, 'UTF8')), 'op-' || g, false, true
FROM generate_series(1, 100) g
ON CONFLICT (source_id, event_id) DO NOTHING;
