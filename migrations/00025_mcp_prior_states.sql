-- +goose Up
-- Prior states (kernel/priorstate): just before a write tool of an MCP server
-- that a declared probe adapter covers (server-memory's create_entities,
-- create_relations, add_observations), the worker reads the facts the call
-- would establish and records them here, so a probe can tell "created by
-- this call" from "already existed before". Written only by the kernel's
-- worker; first write wins.
CREATE TABLE kernel_mcp_prior_states (
    project      text        NOT NULL,
    run_id       text        NOT NULL,
    operation_id text        NOT NULL,
    tool         text        NOT NULL,
    taken_at     timestamptz NOT NULL,
    state        jsonb,
    error        text        NOT NULL DEFAULT '',
    PRIMARY KEY (project, run_id, operation_id)
);

-- +goose Down
DROP TABLE kernel_mcp_prior_states;
