-- +goose Up
-- kernel_runs holds runs started through the API (their plans, for the
-- idempotent start). Child runs are started by their parent's workflow and
-- never had a row, so parent_run_id was never written; a child's parent is
-- in its run.started event (data.parent_run_id).
ALTER TABLE kernel_runs DROP COLUMN parent_run_id;

-- +goose Down
ALTER TABLE kernel_runs ADD COLUMN parent_run_id text;
