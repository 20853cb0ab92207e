-- +goose Up
-- Webhooks (docs/production.md#webhooks): reckon's second outbox. A
-- notification is written in the transaction of the fact it announces,
-- one row per subscribed endpoint, and delivered at least once by the
-- publishers (kernel/webhook).
--
-- The endpoints a database notifies: registered by a delivering process
-- from its RECKON_WEBHOOKS at start-up, so that a writer (the API, the
-- sweep, a worker, a publisher) knows in its own transaction who wants an
-- event without reading any configuration of its own. id names the
-- endpoint by a digest of its URL: the URL itself (a Slack incoming
-- webhook's URL is a secret) and the signing secret stay in the
-- configuration.
CREATE TABLE webhook_endpoints (
    id            text        PRIMARY KEY,
    events        text[]      NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now()
);
-- The writers' lookup of the endpoints that asked for an event
-- (kernel/webhook insertSQL, which runs with sequential scans off).
CREATE INDEX webhook_endpoints_events ON webhook_endpoints USING gin (events);

-- One notification to one endpoint. msg_id is the Standard Webhooks
-- message id (webhook-id), the same on every attempt and for every
-- endpoint of the same fact; (endpoint_id, msg_id) makes a fact written
-- twice (a retried activity) one delivery. body holds the exact bytes
-- that are signed and sent. A row is undelivered while delivered_at is
-- NULL: due at next_attempt_at, which a deliverer moves past its lease
-- when it claims the row (FOR UPDATE SKIP LOCKED) and past the backoff
-- when an attempt fails. Removing an endpoint from the configuration
-- drops its rows with it.
CREATE TABLE webhook_deliveries (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id     text        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    msg_id          text        NOT NULL,
    event           text        NOT NULL,
    body            text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz,
    CONSTRAINT webhook_deliveries_msg UNIQUE (endpoint_id, msg_id)
);

-- The claim's and the backlog gauges' rows: undelivered ones only, so the
-- index stays as small as the backlog.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id)
    WHERE delivered_at IS NULL;
-- The prune of delivered rows past the retention.
CREATE INDEX webhook_deliveries_delivered ON webhook_deliveries (delivered_at)
    WHERE delivered_at IS NOT NULL;

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
