-- One transaction = one event, INSERT ... ON CONFLICT DO NOTHING.
\set b random(1, 1000000000)
INSERT INTO pgbench_ref.events (source_id, event_id, project, run_id, type, ts, actor, data, payload_digest, operation_id, settles, open)
VALUES ('bench1', :b || '-' || random(), 'bench', 'run-1', 'tool.started', now(), 'agent',
       '{"operation_id":"op-1","tool":"run_command","args":{"command":"echo 1 > f"}}', sha256('x'), 'op-1', false, true)
ON CONFLICT (source_id, event_id) DO NOTHING;
