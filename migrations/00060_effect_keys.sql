-- +goose Up
-- The retry guard's lookup (POST /v1/agent/operations/guard,
-- docs/api.md#guard): a call's effect key is its project, its tool and the
-- canonical JSON of its arguments (kernel.Canonical, which ingest stores
-- as data). This index keys every tool.started by project and a digest of
-- tool and arguments, so the guard finds the earlier calls with the same
-- effect with one index range, however long the journal's history. The
-- tool is hashed as its JSON string (quotes included) ahead of the
-- arguments, so no tool and arguments run into another pair's. Absent
-- arguments count as {} (the clients send {} for a call without any).
-- An expression index, not a column: every write path of the journal
-- (ingest, COPY, the outbox's in-database delivery) keeps it without a
-- change, and only tool.started rows pay for it.
CREATE INDEX journal_events_effect_key ON journal_events
    (project, md5((data->'tool')::text || coalesce(data->'args', '{}'::jsonb)::text), seq)
    WHERE type = 'tool.started';

-- +goose Down
DROP INDEX journal_events_effect_key;
