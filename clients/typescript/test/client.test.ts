// The HTTP client against a real reckon dev: ingest that retries with the
// same bytes, the listing, history, reconcile, the queue, runs, refusals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, ReckonError, type Event } from "../dist/index.js";
import { agent, eventually, operator, project, url } from "./env.ts";

function ev(p: string, run: string, op: string, what: string, type: Event["type"], data: Record<string, unknown>): Event {
  return { source_id: "ag1", event_id: `${p}/${run}/${op}/${what}`, project: p, run_id: run, type, ts: new Date().toISOString(), actor: "agent", data: { operation_id: op, ...data } } as Event;
}

test("a retry after a lost answer is answered repeated, never stored twice", async () => {
  const p = project("ingest");
  let sent = 0;
  // The first attempt reaches the server, then its answer is lost.
  const lossy: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (++sent === 1) {
      await res.text();
      throw Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNRESET" } });
    }
    return res;
  };
  const c = new Client({ url, token: process.env.RECKON_TEST_AGENT_TOKEN, fetch: lossy, backoffMs: 10 });
  const batch = [
    ev(p, "r1", "op-1", "started", "tool.started", { tool: "payments.refund", args: { order: "5521" } }),
    ev(p, "r1", "op-1", "failed", "tool.failed", { error_type: "timeout", error: "no answer within 30 s", effect: "uncertain" }),
  ];
  const results = await c.ingest(batch);
  assert.equal(sent, 2);
  assert.deepEqual(results.map((r) => r.status), ["repeated", "repeated"]);
  const ops = await operator.allOperations({ project: p });
  assert.equal(ops.length, 1);
  assert.equal(ops[0].operation_id, "op-1");
  assert.equal(ops[0].state, "failed_uncertain");
});

test("more events than one request takes go in batches of 1,000", async () => {
  const p = project("batches");
  let requests = 0;
  const counting: typeof fetch = (i, init) => { requests++; return fetch(i, init); };
  const c = new Client({ url, token: process.env.RECKON_TEST_AGENT_TOKEN, fetch: counting });
  const events = Array.from({ length: 1001 }, (_, i) => ev(p, "r1", `op-${i}`, "started", "tool.started", { tool: "kv.put", args: { i } }));
  const results = await c.ingest(events);
  assert.equal(requests, 2);
  assert.equal(results.length, 1001);
  assert.ok(results.every((r) => r.status === "accepted"));
  assert.equal(results[1000].event_id, events[1000].event_id);
});

test("history, reconcile (idempotent), and the listing after it", async () => {
  const p = project("reconcile");
  await agent.ingest([
    ev(p, "r1", "op-1", "started", "tool.started", { tool: "crm.update", args: { id: 7 } }),
    ev(p, "r1", "op-1", "failed", "tool.failed", { error_type: "timeout", error: "timed out", effect: "uncertain" }),
  ]);
  const req = { project: p, runId: "r1", operationId: "op-1", effect: "occurred" as const, note: "CRM shows the update", evidence: { audit: "A-1" } };
  const first = await operator.reconcile(req, { idempotencyKey: `k-${p}` });
  const again = await operator.reconcile(req, { idempotencyKey: `k-${p}` });
  assert.equal(first.type, "operation.reconciled");
  assert.equal(again.event_id, first.event_id);
  const hist = await operator.history({ project: p, runId: "r1", operationId: "op-1" });
  assert.deepEqual(hist.map((e) => e.type), ["tool.started", "tool.failed", "operation.reconciled"]);
  await eventually(async () => assert.equal((await operator.allOperations({ project: p })).length, 0));
  assert.deepEqual((await operator.attention({ project: p })).operations, []);
  const v = await operator.verdicts({ project: p });
  assert.deepEqual(v.verdicts, []);
  assert.ok((await operator.projects()).projects.includes(p));
});

test("an agent token may only ingest: reading is a 403 that names the role", async () => {
  await assert.rejects(agent.listOperations({ project: "x" }), (err: unknown) => {
    assert.ok(err instanceof ReckonError);
    assert.equal(err.status, 403);
    assert.match(err.message, /role agent/);
    return true;
  });
  assert.deepEqual(await agent.whoami(), { name: "ag1", role: "agent" });
});

test("a refused event is a 400 naming the event and the field, not retried", async () => {
  let calls = 0;
  const counting: typeof fetch = (i, init) => { calls++; return fetch(i, init); };
  const c = new Client({ url, token: process.env.RECKON_TEST_AGENT_TOKEN, fetch: counting });
  const bad = { ...ev(project("bad"), "r1", "op-1", "started", "tool.started", { tool: "t" }), ts: "yesterday" };
  await assert.rejects(c.ingest([bad]), (err: unknown) => {
    assert.ok(err instanceof ReckonError);
    assert.equal(err.status, 400);
    assert.equal(err.eventIndex, 0);
    assert.match(err.message, /field "ts"/);
    return true;
  });
  assert.equal(calls, 1);
});

test("start a kernel run and read it", async () => {
  const p = project("run");
  const started = await operator.startRun({ project: p, runId: "deploy-1", plan: { steps: [{ tool: "run_command", args: { command: "echo ok > proof.txt" } as any }] } });
  assert.deepEqual(started, { project: p, run_id: "deploy-1" });
  // The run's events reach the journal through the outbox, a moment after the workflow wrote them.
  await eventually(async () => {
    const run = await operator.getRun("deploy-1", { project: p });
    assert.equal(run.status, "completed");
    assert.deepEqual(run.events.map((e) => e.type), ["run.started", "tool.started", "tool.completed", "run.completed"]);
  }, 30_000);
});
