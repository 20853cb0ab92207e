-- +goose Up
-- The MCP gateway's source is the gateway's alone. Its source is not one of
-- reckon's reserved names (kernel, supervisor, operator…): an operator
-- chooses it (RECKON_GATEWAY_SOURCE, default mcp-gateway), and a token
-- could be named like it or granted it. Event keys are (source_id,
-- event_id), whatever the run, so such a token could write, into a run of
-- its own, an event under the gateway's source with the id the gateway
-- will give a call's tool.started later (<project>/<run>/op-<n>/started).
-- The gateway's own event then conflicts with it in the journal and is
-- parked: a call made upstream with its tool.started never journaled.
--
-- reckon_check_agent_events now first refuses (RK003) an agents' write
-- under the default gateway source or under any source a gateway instance
-- has registered with (gateway_instances, written as each gateway starts).
-- A custom source is protected from the first start of a gateway using it.
-- Same name and signature: API processes of the version before call it
-- and are protected too.
CREATE INDEX gateway_instances_source ON gateway_instances (source_id);

-- +goose StatementBegin
-- +reckon include functions/reckon_check_agent_events.sql
-- +goose StatementEnd

-- +goose Down
DROP INDEX gateway_instances_source;
