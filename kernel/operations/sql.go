package operations

import "github.com/seed-7bc021c3/reckon/kernel/journal"

// All of the operations projection's SQL, in one reviewed place.

// listSQL pages through a project's unresolved operations. It reads the open
// set from the partial index journal_events_open_ops (project, ts, seq) WHERE
// type = 'tool.started' AND open, so its cost follows the number of open
// operations, not journal history. The open hint is only a hint: every
// candidate is re-verified against the settling events of the same
// (project, run_id, operation_id), from any source. Per candidate it makes
// two index probes: one over the operation's own events (settled? an
// earlier tool.started of the same operation? the newest tool.failed and
// who reported it) and
// one over the run's lifecycle events (who started it, whether it ended).
// An operation is listed once, under its first tool.started inside the
// window: a copy dated before the window (an agent may date its reports as
// far back as the epoch) is not listed itself, so it must not hide the one
// that is.
//
// A tool.started is inside the window when its ts or its ingested_at is at
// or after the window start: ts is the agent's clock, and an agent that
// dated its report just inside the window (POST /v1/events takes it) would
// otherwise have it fall out moments later, an operation hidden from the
// operator by the agent's own clock. ingested_at is the journal's. The
// same predicate picks the candidates and decides which earlier copy
// hides a later one, so a copy inside by either clock hides the later
// copies and one outside by both never hides. The index range starts at
// the floor $7 (Service.window says why, and what that accepts); the OR
// is a filter over that range, whose cost follows the open operations of
// two windows, not journal history.
//
// $1 project, $2 window start, $3 run_id (empty: every run), $4/$5 the first
// (ts, seq) position to return, $6 limit, $7 the floor of ts.
var listSQL = `
SELECT s.seq, s.source_id, s.event_id, s.run_id, s.operation_id, s.ts, s.ingested_at, s.data,
       o.failure, o.failure_source, o.failure_event, rl.started_source, coalesce(rl.ended, false)
FROM journal_events s
CROSS JOIN LATERAL (
    SELECT bool_or(t.settles) AS settled,
           bool_or(t.type = 'tool.started' AND t.ts >= $7 AND (t.ts >= $2 OR t.ingested_at >= $2)
                   AND (t.ts, t.seq) < (s.ts, s.seq)) AS earlier,
           (array_agg(t.data ORDER BY t.ts DESC, t.seq DESC) FILTER (WHERE t.type = 'tool.failed'))[1] AS failure,
           (array_agg(t.source_id ORDER BY t.ts DESC, t.seq DESC) FILTER (WHERE t.type = 'tool.failed'))[1] AS failure_source,
           (array_agg(t.event_id ORDER BY t.ts DESC, t.seq DESC) FILTER (WHERE t.type = 'tool.failed'))[1] AS failure_event
    FROM journal_events t
    WHERE t.project = s.project AND t.run_id = s.run_id AND t.operation_id = s.operation_id
      AND ` + journal.RunBound("t.ingested_at", "s") + `
) o
CROSS JOIN LATERAL (
    SELECT (array_agg(r.source_id ORDER BY r.seq) FILTER (WHERE r.type = 'run.started'))[1] AS started_source,
           bool_or(r.type <> 'run.started') AS ended
    FROM journal_events r
    WHERE r.project = s.project AND r.run_id = s.run_id
      AND r.type IN ('run.started', 'run.completed', 'run.failed')
      AND ` + journal.RunBound("r.ingested_at", "s") + `
) rl
WHERE s.project = $1 AND s.type = 'tool.started' AND s.open
  AND s.ts >= $7 AND (s.ts >= $2 OR s.ingested_at >= $2)
  AND (s.ts, s.seq) >= ($4::timestamptz, $5::bigint)
  AND ($3 = '' OR s.run_id = $3)
  AND NOT coalesce(o.settled, false)
  AND NOT coalesce(o.earlier, false)
ORDER BY s.ts, s.seq
LIMIT $6`

// childSummarySQL counts, per child run, its operations, those still
// unresolved, and those whose last settling event says effect none and
// unknown (kernel.Replay's rule), for delegations whose failure did not
// carry the summary (a delegate caught in the crash window has no
// tool.failed at all). One statement for every child run of a page; per
// operation one probe of the operation index. $1 project, $2 child run ids,
// $3 the source of each one's delegation (its tool.started's): only that
// source's tool.started events count, and only its settling events and
// reckon's own (source kernel: operator and supervisor reconciliations)
// settle them, so no other writer's events in the child run (journaled
// before migration 00032 made an agent's child runs its own) make up the
// delegation's summary.
const childSummarySQL = `
SELECT s.run_id, q.source_id,
       count(DISTINCT s.operation_id),
       count(DISTINCT s.operation_id) FILTER (WHERE l.effect IS NULL),
       count(DISTINCT s.operation_id) FILTER (WHERE l.effect = 'none'),
       count(DISTINCT s.operation_id) FILTER (WHERE l.effect = 'unknown')
FROM (SELECT DISTINCT * FROM unnest($2::text[], $3::text[])) AS q(run_id, source_id)
JOIN journal_runs qr ON qr.project = $1 AND qr.run_id = q.run_id
JOIN journal_events s
  ON s.project = $1 AND s.run_id = q.run_id AND s.source_id = q.source_id AND s.type = 'tool.started'
  AND s.ingested_at >= qr.first_ingested_at AND s.ingested_at < qr.ingested_before
LEFT JOIN LATERAL (
    SELECT CASE t.type WHEN 'tool.completed' THEN 'occurred' WHEN 'tool.blocked' THEN 'none'
                ELSE coalesce(nullif(t.data->>'effect', ''), 'unknown') END AS effect
    FROM journal_events t
    WHERE t.project = s.project AND t.run_id = s.run_id
      AND t.operation_id = s.operation_id AND t.settles
      AND t.source_id IN (q.source_id, 'kernel')
      AND t.ingested_at >= qr.first_ingested_at AND t.ingested_at < qr.ingested_before
    ORDER BY t.seq DESC
    LIMIT 1
) l ON true
GROUP BY s.run_id, q.source_id`

// projectsSQL lists projects with at least one open operation inside the
// window (by its ts or its ingested_at, as listSQL), from the same partial
// index. $1 window start, $2 the floor of ts (listSQL's $7).
var projectsSQL = `
SELECT DISTINCT s.project FROM journal_events s
WHERE s.type = 'tool.started' AND s.open
  AND s.ts >= $2 AND (s.ts >= $1 OR s.ingested_at >= $1)
  AND NOT EXISTS (
      SELECT 1 FROM journal_events t
      WHERE t.project = s.project AND t.run_id = s.run_id AND t.operation_id = s.operation_id
        AND t.settles AND ` + journal.RunBound("t.ingested_at", "s") + `)
ORDER BY 1`

// knownProjectsSQL lists the journal's projects with a skip scan of an
// index that leads with project (journal_events_run, journal_events_type_ts):
// one index descent per project, however many events each has. It starts
// at $1 (included when $2), keeps the names that start with $3 and stops
// at the first that does not, and returns at most $4.
const knownProjectsSQL = `
WITH RECURSIVE p(project) AS (
    (SELECT project FROM journal_events
      WHERE project > $1 OR ($2 AND project = $1) ORDER BY project LIMIT 1)
  UNION ALL
    SELECT (SELECT e.project FROM journal_events e WHERE e.project > p.project ORDER BY e.project LIMIT 1)
    FROM p WHERE p.project IS NOT NULL AND starts_with(p.project, $3)
)
SELECT project FROM p WHERE project IS NOT NULL AND starts_with(project, $3) LIMIT $4`

// knownProjectsCTE is the same skip scan over every project, as p.
const knownProjectsCTE = `
WITH RECURSIVE p(project) AS (
    (SELECT project FROM journal_events ORDER BY project LIMIT 1)
  UNION ALL
    SELECT (SELECT e.project FROM journal_events e WHERE e.project > p.project ORDER BY e.project LIMIT 1)
    FROM p WHERE p.project IS NOT NULL
)`

// lockOperationSQL serializes reconciles of one operation until the end of
// the caller's transaction.
const lockOperationSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`

// lockOperationsSQL is lockOperationSQL for several operations, taken in
// the order of the (sorted) array $1.
const lockOperationsSQL = `SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM unnest($1::text[]) AS k`

// tryTriageLockSQL takes a run's triage lock on the session (held across
// the model call, released by unlockTriageSQL or with the run's last
// wall). The two-key form keeps triage locks in a key space of their own:
// classid is a constant (triageLockClass), objid hashes the run. Advisory
// locks are database-wide, so the key includes the schema: two
// installations in one database (or two tests) never block each other.
const tryTriageLockSQL = `SELECT pg_try_advisory_lock($1::int4, hashtext(current_schema() || ':' || $2))`

// dbClockSQL reads the database's clock (not the transaction's start) in
// a triage read's round trip: the probes measure every wait on it.
const dbClockSQL = `SELECT clock_timestamp()`

const unlockTriageSQL = `SELECT pg_advisory_unlock($1::int4, hashtext(current_schema() || ':' || $2))`

// commitUnlockSQL commits a run's last wall and then releases the run's
// triage lock, in one round trip: the statements of a simple query run in
// order and an error (a failed commit) skips the rest, so the lock is
// never released before the wall is committed. A lock connection's
// session holds no other advisory lock (a run's lock at a time, released
// before the connection goes back to the lock pool), so unlocking all is
// unlocking the run. Its one result hides COMMIT's tag, which says
// ROLLBACK only for a transaction already aborted by an error: lazyTx
// commits only when every statement succeeded.
const commitUnlockSQL = `COMMIT; ` + unlockAllSQL

// unlockAllSQL releases a lock connection's session locks: the run's
// triage lock, the only one it holds (see commitUnlockSQL).
const unlockAllSQL = `SELECT pg_advisory_unlock_all()`

// triageLockClass is the advisory-lock classid of triage locks ("rkn1").
const triageLockClass = 0x726b6e31

// readUnchangedSQL is QueueReconcileAll's guard, run once the operations'
// locks are held: it raises RK004 (reckon_require, migration 00033) when
// the journal holds an event of one of the operations $3 of run $1/$2
// whose key is not among the keys read ($4/$5), or the outbox an
// undelivered event of the run (any operation, any type) whose key is not
// among the pending keys read ($6/$7). Keys, not sequence numbers: a
// journal row with a lower seq may commit after one with a higher.
var readUnchangedSQL = `
SELECT reckon_require(
    NOT EXISTS (
        SELECT 1 FROM journal_events j
        WHERE j.project = $1 AND j.run_id = $2 AND j.operation_id = ANY($3::text[])
          AND ` + journal.RunBoundParams("j.ingested_at") + `
          AND (j.source_id, j.event_id) NOT IN (SELECT * FROM unnest($4::text[], $5::text[])))
    AND NOT EXISTS (
        SELECT 1 FROM kernel_event_outbox o
        WHERE o.id = ANY (ARRAY(SELECT u.id FROM kernel_event_outbox_undelivered u
                WHERE u.project = $1 AND u.run_id = $2))
          AND (o.source_id, o.event_id) NOT IN (SELECT * FROM unnest($6::text[], $7::text[]))),
    '` + runChangedCode + `',
    'reconcile: run "' || $2 || '" of project "' || $1 || '" changed since it was read; read it again under the operations'' locks')`

// attentionSQL pages through the operator's queue: operations whose newest
// reconciliation is the supervisor's and either says unknown or belongs to
// a verdict that asked for attention, with no later reconciliation (an
// operator's ruling) in the journal, nor one on its way in the outbox (the
// operations $7/$8, which Attention reads with outbox.Pending first). It
// reads the partial index journal_events_supervisor_reconciled (project,
// ts, seq) inside the window, so its cost follows the supervisor's recent
// reconciliations, not journal history; per candidate it probes the
// operation's own events (a later reconciliation?) and two unique keys
// (the verdict, the tool.started).
//
// $1 project, $2 window start, $3 run_id (empty: every run), $4/$5 the first
// (ts, seq) position to return, $6 limit, $7/$8 the (run_id, operation_id)
// pairs with a reconciliation pending in the outbox.
var attentionSQL = `
SELECT r.seq, r.source_id, r.event_id, r.run_id, r.operation_id, r.ts, r.data,
       s.source_id, s.event_id, s.ts, s.data->>'tool',
       v.source_id, v.event_id, coalesce((v.data->>'needs_attention')::boolean, false), v.data->>'supervisor', v.data->>'model'
FROM journal_events r` + attentionVerdictJoin + `
LEFT JOIN journal_keys sk
       ON sk.source_id = r.parent_source_id AND sk.event_id = r.parent_event_id
LEFT JOIN journal_events s
       ON s.seq = sk.seq AND s.ingested_at = sk.ingested_at
WHERE r.project = $1 AND r.ts >= $2` + attentionWaiting + `
  AND (r.ts, r.seq) >= ($4::timestamptz, $5::bigint)
  AND ($3 = '' OR r.run_id = $3)
  AND (r.run_id, r.operation_id) NOT IN (SELECT * FROM unnest($7::text[], $8::text[]))
ORDER BY r.ts, r.seq
LIMIT $6`

// attentionVerdictJoin joins a supervisor reconciliation r to the verdict
// of its wall as v (by the key its evidence names, through the key table:
// one probe of the journal's primary key).
const attentionVerdictJoin = `
LEFT JOIN journal_keys vk
       ON vk.source_id = r.data->'evidence'->'verdict'->>'source_id'
      AND vk.event_id = r.data->'evidence'->'verdict'->>'event_id'
LEFT JOIN journal_events v
       ON v.seq = vk.seq AND v.ingested_at = vk.ingested_at
      AND v.type = 'supervisor.verdict'`

// attentionWaiting is the operator's queue's condition on r, joined to its
// verdict v (attentionVerdictJoin): a supervisor's reconciliation (the
// predicate of journal_events_supervisor_reconciled) that says unknown or
// whose verdict asked for attention, with no later reconciliation of its
// operation in the journal. The queue (attentionSQL) and its gauges
// (backlogSQL) share it, so that they count the same operations.
var attentionWaiting = `
  AND r.type = 'operation.reconciled' AND r.actor = 'supervisor'
  AND (r.data->>'effect' = 'unknown' OR coalesce((v.data->>'needs_attention')::boolean, false))
  AND NOT EXISTS (
      SELECT 1 FROM journal_events t
      WHERE t.project = r.project AND t.run_id = r.run_id AND t.operation_id = r.operation_id
        AND ` + journal.RunBound("t.ingested_at", "r") + `
        AND t.type = 'operation.reconciled' AND (t.ts, t.seq) > (r.ts, r.seq))`

// backlogSQL feeds the pipeline's gauges of what waits for people
// (Service.Backlog): per project (knownProjectsCTE, at most $2 of them),
// the operator's queue's size and its oldest decision (attentionWaiting
// inside the window from $1, and no ruling on its way in the outbox: the
// operation's undelivered rows by kernel_event_outbox_undelivered_run,
// read by id), and the runs awaiting a settlement: a kernel run.awaiting
// inside the window (journal_events_type_ts) whose operation has no
// run.resumed (journal_events_operation) and whose run has not ended
// (journal_events_run_lifecycle), each a scalar subquery with LIMIT 1, an
// index probe per wait: as NOT EXISTS the planner may anti-join every
// ended run of the project's history instead. Each project is an index
// range of the supervisor's recent reconciliations and of its recent
// waits, never of journal history; projects with neither are left out.
// TestBacklogPlanReadsIndexes.
var backlogSQL = knownProjectsCTE + `,
projects AS (SELECT project FROM p WHERE project IS NOT NULL LIMIT $2)
SELECT p.project, q.n, q.oldest, w.n
FROM projects p
CROSS JOIN LATERAL (
    SELECT count(*) AS n, min(r.ts) AS oldest
    FROM journal_events r` + attentionVerdictJoin + `
    WHERE r.project = p.project AND r.ts >= $1` + attentionWaiting + `
      AND NOT EXISTS (
          SELECT 1 FROM kernel_event_outbox o
          WHERE o.id = ANY (ARRAY(SELECT u.id FROM kernel_event_outbox_undelivered u
                  WHERE u.project = r.project AND u.run_id = r.run_id AND u.operation_id = r.operation_id))
            AND o.event->>'type' = 'operation.reconciled')
) q
CROSS JOIN LATERAL (
    SELECT count(DISTINCT a.run_id) AS n
    FROM journal_events a
    WHERE a.project = p.project AND a.type = 'run.awaiting' AND a.ts >= $1 AND a.source_id = 'kernel'
      AND (SELECT true FROM journal_events e
           WHERE e.project = a.project AND e.run_id = a.run_id AND e.operation_id = a.operation_id
             AND e.type = 'run.resumed' AND e.source_id = 'kernel'
             AND ` + journal.RunBound("e.ingested_at", "a") + `
           LIMIT 1) IS NULL
      AND (SELECT true FROM journal_events e
           WHERE e.project = a.project AND e.run_id = a.run_id
             AND e.type IN ('run.completed', 'run.failed') AND e.source_id = 'kernel'
             AND ` + journal.RunBound("e.ingested_at", "a") + `
           LIMIT 1) IS NULL
) w
WHERE q.n > 0 OR w.n > 0
ORDER BY p.project`

// newestReconciledSQL returns, for each (run_id, operation_id) pair of $2
// and $3, its newest reconciliation in the journal: who decided what, when.
// One statement for a page of verdicts; each pair is one index probe.
const newestReconciledSQL = `
SELECT DISTINCT ON (q.run_id, q.operation_id)
       q.run_id, q.operation_id, t.source_id, t.event_id, t.actor, t.ts, t.data->>'effect'
FROM unnest($2::text[], $3::text[]) AS q(run_id, operation_id)
JOIN journal_runs qr ON qr.project = $1 AND qr.run_id = q.run_id
JOIN journal_events t
  ON t.project = $1 AND t.run_id = q.run_id AND t.operation_id = q.operation_id
 AND t.ingested_at >= qr.first_ingested_at AND t.ingested_at < qr.ingested_before
 AND t.type = 'operation.reconciled'
ORDER BY q.run_id, q.operation_id, t.ts DESC, t.seq DESC`

// kernelRunsSQL returns which of the candidate (project, run_id) pairs are
// runs started through the API, with runWritersSQL's columns: index
// lookups on the primary key.
const kernelRunsSQL = `
SELECT k.project, k.run_id, 'kernel', ''
FROM unnest($1::text[], $2::text[]) AS c(project, run_id)
JOIN kernel_runs k ON k.project = c.project AND k.run_id = c.run_id`

// runWritersSQL returns, for the candidate (project, run_id) pairs, who
// writes the events of those that have a writer: the recorder of kernel
// and gateway runs (kernel.RecorderKernel, kernel.RecorderGateway) with an
// empty source, and the owning source of agents' runs (agent_runs,
// migration 00030) with an empty recorder; each an index lookup on a
// primary key. A run in more than one table (which none of the writers
// lets happen) comes out more than once; RunWriters prefers the kernel's.
const runWritersSQL = `
SELECT a.project, a.run_id, '', a.source_id
FROM unnest($1::text[], $2::text[]) AS c(project, run_id)
JOIN agent_runs a ON a.project = c.project AND a.run_id = c.run_id
UNION ALL
SELECT g.project, g.run_id, 'mcp-gateway', ''
FROM unnest($1::text[], $2::text[]) AS c(project, run_id)
JOIN gateway_runs g ON g.project = c.project AND g.run_id = c.run_id
UNION ALL
SELECT k.project, k.run_id, 'kernel', ''
FROM unnest($1::text[], $2::text[]) AS c(project, run_id)
JOIN kernel_runs k ON k.project = c.project AND k.run_id = c.run_id`

// runColumnsSQL selects a run of the runs index (journal_runs, migration
// 00055) as scanRuns reads it: its place in the list, its row, its kind
// (the kernel's source; else a gateway_runs row, one probe of its primary
// key; else an agent's) and its child runs' count (index
// journal_runs_children).
const runColumnsSQL = `
SELECT r.listed, r.run_id, r.source_id, r.status, r.started_at, r.ended_at, r.parent_run_id,
       CASE WHEN r.source_id = 'kernel' THEN 'kernel'
            WHEN EXISTS (SELECT 1 FROM gateway_runs g WHERE g.project = r.project AND g.run_id = r.run_id) THEN 'gateway'
            ELSE 'agent' END,
       (SELECT count(*) FROM journal_runs c WHERE c.project = r.project AND c.parent_run_id = r.run_id)
FROM journal_runs r`

// runsSQL, runsOfStatusSQL and runsOfParentSQL page through a project's
// runs newest first, each from its own index (journal_runs_listed,
// journal_runs_status, journal_runs_children): the page's rows and no
// more, however many runs the project has. $1 project, $2 the list
// position to continue below, $3 the rows to return; $4 the status, or
// the parent run and $5 a status (empty: any).
const (
	runsSQL = runColumnsSQL + `
WHERE r.project = $1 AND r.listed < $2
ORDER BY r.listed DESC
LIMIT $3`
	runsOfStatusSQL = runColumnsSQL + `
WHERE r.project = $1 AND r.status = $4 AND r.listed < $2
ORDER BY r.listed DESC
LIMIT $3`
	runsOfParentSQL = runColumnsSQL + `
WHERE r.project = $1 AND r.parent_run_id = $4 AND ($5 = '' OR r.status = $5) AND r.listed < $2
ORDER BY r.listed DESC
LIMIT $3`
)

// runByIDSQL is one run of the index ($1 project, $2 run id).
const runByIDSQL = runColumnsSQL + `
WHERE r.project = $1 AND r.run_id = $2`

// runCountsSQL counts, for each run $2 of project $1, its operations (an
// operation id with a tool.started) and those an event settles, as
// kernel.Replay does: one pass over each run's operation events in the
// operation index (journal_events_operation). A run without operations
// has no row.
const runCountsSQL = `
SELECT q.run_id, count(*), count(*) FILTER (WHERE o.settled)
FROM (SELECT DISTINCT run_id FROM unnest($2::text[]) AS u(run_id)) q
JOIN journal_runs qr ON qr.project = $1 AND qr.run_id = q.run_id
CROSS JOIN LATERAL (
    SELECT t.operation_id, bool_or(t.settles) AS settled
    FROM journal_events t
    WHERE t.project = $1 AND t.run_id = q.run_id AND t.operation_id IS NOT NULL
      AND t.ingested_at >= qr.first_ingested_at AND t.ingested_at < qr.ingested_before
    GROUP BY t.operation_id
    HAVING bool_or(t.type = 'tool.started')
) o
GROUP BY q.run_id`

// runLifecycleSQL is listSQL's lifecycle probe for one run: the source of
// its first run.started (NULL without one) and whether it has ended
// (index journal_events_run_lifecycle). $1 project, $2 run id.
var runLifecycleSQL = `
SELECT (array_agg(r.source_id ORDER BY r.seq) FILTER (WHERE r.type = 'run.started'))[1],
       coalesce(bool_or(r.type <> 'run.started'), false)
FROM journal_events r
WHERE r.project = $1 AND r.run_id = $2
  AND ` + journal.RunBoundParams("r.ingested_at") + `
  AND r.type IN ('run.started', 'run.completed', 'run.failed')`

// runOperationsSQL pages through one run's operations in the order they
// started: each operation under its first tool.started (index
// journal_events_run from seq $3 on), with listSQL's probe of the
// operation's own events (its newest tool.failed, and who reported it)
// and its newest settling event in journal order, read by seq. $1
// project, $2 run id, $3 the seq to continue after, $4 the rows to
// return.
var runOperationsSQL = `
SELECT s.seq, s.source_id, s.event_id, s.operation_id, s.ts, s.ingested_at, s.data,
       o.failure, o.failure_source, o.failure_event,
       l.source_id, l.event_id, l.type, l.actor, l.ts, l.data
FROM journal_events s
CROSS JOIN LATERAL (
    SELECT bool_or(t.type = 'tool.started' AND t.seq < s.seq) AS earlier,
           (array_agg(t.data ORDER BY t.ts DESC, t.seq DESC) FILTER (WHERE t.type = 'tool.failed'))[1] AS failure,
           (array_agg(t.source_id ORDER BY t.ts DESC, t.seq DESC) FILTER (WHERE t.type = 'tool.failed'))[1] AS failure_source,
           (array_agg(t.event_id ORDER BY t.ts DESC, t.seq DESC) FILTER (WHERE t.type = 'tool.failed'))[1] AS failure_event,
           max(t.seq) FILTER (WHERE t.settles) AS settled_seq
    FROM journal_events t
    WHERE t.project = s.project AND t.run_id = s.run_id AND t.operation_id = s.operation_id
      AND ` + journal.RunBoundParams("t.ingested_at") + `
) o
LEFT JOIN journal_events l ON l.seq = o.settled_seq AND ` + journal.RunBoundParams("l.ingested_at") + `
WHERE s.project = $1 AND s.run_id = $2 AND s.type = 'tool.started' AND s.seq > $3
  AND ` + journal.RunBoundParams("s.ingested_at") + `
  AND NOT coalesce(o.earlier, false)
ORDER BY s.seq
LIMIT $4`

// guardTwinsSQL lists the calls with a given effect key (the guard's
// "same call": project $1, tool $2, canonical arguments $3) whose
// tool.started is inside the window ($4 start, $5 floor of ts: listSQL's
// $2 and $7), of one run $6 or of every run (”), newest first, at most
// $7 rows, each with its newest settling event, if any. Calls the guard
// itself stopped (settled by tool.blocked) are left out: a held agent's
// retries must not push the call they wait on out of the page. The
// digest's range of journal_events_effect_key (migration 00060) finds
// them; the digest's equal tool and arguments are then compared in full.
// TestGuardPlan.
var guardTwinsSQL = `
SELECT s.run_id, s.operation_id, s.source_id, s.event_id, s.ts,
       l.source_id, l.event_id, l.type, l.ts, l.actor, l.data,
       l.parent_source_id, l.parent_event_id
FROM journal_events s
LEFT JOIN LATERAL (
    SELECT t.source_id, t.event_id, t.type, t.ts, t.actor, t.data, t.parent_source_id, t.parent_event_id
    FROM journal_events t
    WHERE t.project = s.project AND t.run_id = s.run_id AND t.operation_id = s.operation_id AND t.settles
      AND ` + journal.RunBound("t.ingested_at", "s") + `
    ORDER BY t.seq DESC
    LIMIT 1
) l ON true
WHERE s.project = $1 AND s.type = 'tool.started'
  AND md5((s.data->'tool')::text || coalesce(s.data->'args', '{}'::jsonb)::text)
      = md5(to_jsonb($2::text)::text || $3::jsonb::text)
  AND s.data->'tool' = to_jsonb($2::text) AND coalesce(s.data->'args', '{}'::jsonb) = $3::jsonb
  AND s.ts >= $5 AND (s.ts >= $4 OR s.ingested_at >= $4)
  AND ($6 = '' OR s.run_id = $6)
  AND l.type IS DISTINCT FROM 'tool.blocked'
ORDER BY s.seq DESC
LIMIT $7`

// watchSQL lists the events the verdict stream carries (GET
// /v1/agent/operations/watch) after journal position $3, of project $1 and
// run $2 (” for every run), in journal order, at most $4: every settling
// event, every tool.failed (an uncertain one puts its operation in the
// listing), the supervisor's verdicts and the runs' waits. The primary
// key's range from $3 serves it: a stream asks from its last position, a
// moment ago. The rows of transactions begun in the last $5 milliseconds
// are left for the next read (WatchSettle), and so is everything after
// the first of them.
const watchSQL = `
WITH rows AS (
    SELECT seq, source_id, event_id, run_id, type, ts, actor, parent_source_id, parent_event_id, data,
           ingested_at >= now() - make_interval(secs => $5::float8 / 1000) AS fresh
    FROM journal_events
    WHERE seq > $3 AND project = $1 AND ($2 = '' OR run_id = $2)
      AND (settles OR type IN ('tool.failed', 'supervisor.verdict', 'run.awaiting', 'run.resumed'))
    ORDER BY seq
    LIMIT $4
)
SELECT seq, source_id, event_id, run_id, type, ts, actor, parent_source_id, parent_event_id, data
FROM rows
WHERE seq < coalesce((SELECT min(seq) FROM rows WHERE fresh), 9223372036854775807)
ORDER BY seq`

// watchHeadSQL is the journal's last position (0 when empty): where a
// stream without Last-Event-ID starts.
const watchHeadSQL = `SELECT coalesce(max(seq), 0) FROM journal_events`

// sweepClaimLockSQL serializes the sweep leases' claims (ClaimSweepShare)
// until the end of the claim's transaction: a claim reads every holder
// and lease and then writes, so two never interleave. The key space is
// triageLockClass's, objid the schema's name (two installations in one
// database claim apart).
const sweepClaimLockSQL = `SELECT pg_advisory_xact_lock($1::int4, hashtext(current_schema() || ':sweep-leases'))`

// sweepHeartbeatSQL renews holder $1's heartbeat to $2 and forgets the
// holders whose heartbeat expired before $3 (they no longer count as
// live).
const sweepHeartbeatSQL = `
WITH beat AS (
    INSERT INTO sweep_holders (holder, expires_at) VALUES ($1, $2)
    ON CONFLICT (holder) DO UPDATE SET expires_at = EXCLUDED.expires_at
)
DELETE FROM sweep_holders WHERE expires_at <= $3 AND holder <> $1`

// sweepLiveSQL counts the live holders at $1 (the caller among them).
const sweepLiveSQL = `SELECT count(*) FROM sweep_holders WHERE expires_at > $1`

// sweepLeasesSQL reads every bucket's lease and whether it is live at $1.
const sweepLeasesSQL = `SELECT bucket, holder, expires_at > $1 FROM sweep_leases`

// sweepTakeSQL leases buckets $2 to holder $1 until $3: renewed when
// held, taken when free or expired (the claim decided which, under
// sweepClaimLockSQL).
const sweepTakeSQL = `
INSERT INTO sweep_leases (bucket, holder, expires_at)
SELECT b, $1, $3 FROM unnest($2::int[]) AS b
ON CONFLICT (bucket) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at`

// sweepReleaseSQL gives up holder $1's buckets other than $2 (those over
// its fair share, or every one when $2 is empty).
const sweepReleaseSQL = `DELETE FROM sweep_leases WHERE holder = $1 AND bucket <> ALL($2::int[])`

// sweepLeaveSQL removes holder $1's heartbeat (it stops: the others'
// share grows at their next claim).
const sweepLeaveSQL = `DELETE FROM sweep_holders WHERE holder = $1`
