-- +goose Up
-- reckon_require raises an error with SQLSTATE code and message unless ok
-- is true, and returns true otherwise: a statement's condition turned into
-- an error that aborts its transaction. A triage wall is written in one
-- round trip, its COMMIT queued right behind its writes
-- (operations.QueueReconcileAll): a write that finds the run changed since
-- it was read (RK004) or one of its events already enqueued (RK005) must
-- keep that COMMIT from committing, and only an error in the transaction
-- does; the sweep then rolls back and writes the wall the checked way.
-- +goose StatementBegin
-- +reckon include functions/reckon_require.sql
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION reckon_require(boolean, text, text);
