-- +goose Up
-- Runs started through the API: the plan a client-chosen run id was started
-- with, so the same plan again is an idempotent start and a different one a
-- conflict. Run state itself lives in Temporal and the journal.
CREATE TABLE kernel_runs (
    project     text        NOT NULL,
    run_id      text        NOT NULL,
    plan        jsonb       NOT NULL,
    plan_digest bytea       NOT NULL,
    workflow_id text        NOT NULL,
    parent_run_id text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, run_id)
);

-- Ground truth of injected faults: what truly happened to an operation. Drills
-- read it; the supervisor never sees it (no API serves it).
CREATE TABLE kernel_fault_records (
    project      text        NOT NULL,
    run_id       text        NOT NULL,
    operation_id text        NOT NULL,
    tool         text        NOT NULL,
    fault        text        NOT NULL, -- after_effect | before_effect
    truth        text        NOT NULL, -- occurred | none
    detail       jsonb       NOT NULL DEFAULT '{}',
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, run_id, operation_id)
);

-- +goose Down
DROP TABLE kernel_fault_records;
DROP TABLE kernel_runs;
