-- +goose Up
-- Workspace manifests (kernel/manifest): before each workspace tool call and
-- after each completed one, the worker records the run's workspace (path,
-- type, size, mode, times, inode, and a content hash where metadata cannot
-- decide). tool.started / tool.completed carry only the digest and counts;
-- the entries live here so the workspace-diff probe can name changed paths.
-- Written only by the kernel's worker; one row per (run, operation, phase),
-- first write wins so a retried activity cannot replace what an event names.
CREATE TABLE kernel_workspace_manifests (
    project      text        NOT NULL,
    run_id       text        NOT NULL,
    operation_id text        NOT NULL,
    phase        text        NOT NULL CHECK (phase IN ('before', 'after')),
    taken_at     timestamptz NOT NULL,
    digest       text        NOT NULL,
    files        integer     NOT NULL,
    dirs         integer     NOT NULL,
    other        integer     NOT NULL,
    bytes        bigint      NOT NULL,
    hashed       integer     NOT NULL,
    truncated    text        NOT NULL DEFAULT '',
    entries      jsonb       NOT NULL,
    PRIMARY KEY (project, run_id, operation_id, phase)
);

-- +goose Down
DROP TABLE kernel_workspace_manifests;
