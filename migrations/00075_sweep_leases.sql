-- +goose Up
-- The sweep leases (docs/triage.md#several-pipeline-processes): the
-- pipeline processes share the scheduled sweep by leasing buckets of
-- projects (a project's bucket is a hash of its name, pipeline/triage).
-- Each process renews its heartbeat row and its buckets' leases every
-- third of RECKON_SWEEP_LEASE, and claims at most a fair share of the
-- buckets (buckets over the live holders: those whose heartbeat has not
-- expired). A holder that stops renewing loses its buckets when their
-- leases expire; the others claim them on their next renewal. Every claim
-- runs in one transaction under one advisory lock (kernel/operations,
-- sweepClaimLockSQL), so two claims never interleave.
CREATE TABLE sweep_holders (
    holder     text        PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

CREATE TABLE sweep_leases (
    bucket     int         PRIMARY KEY CHECK (bucket >= 0),
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE sweep_leases;
DROP TABLE sweep_holders;
