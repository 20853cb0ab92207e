-- +goose Up
-- Evidence retention (RECKON_EVIDENCE_RETENTION): the periodic maintenance
-- deletes workspace manifests and MCP prior states taken longer ago than the
-- retention, a bounded batch at a time. Without an index on taken_at each
-- batch would scan the whole table, and a manifest row holds every entry of
-- its workspace.
CREATE INDEX kernel_workspace_manifests_taken_at ON kernel_workspace_manifests (taken_at);
CREATE INDEX kernel_mcp_prior_states_taken_at ON kernel_mcp_prior_states (taken_at);

-- +goose Down
DROP INDEX kernel_mcp_prior_states_taken_at;
DROP INDEX kernel_workspace_manifests_taken_at;
