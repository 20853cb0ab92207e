// Tool wrappers against a real reckon dev, without the retry guard: what
// each outcome of a call leaves in the journal.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { Client, NoEffectError, Reckon, tool } from "../dist/index.js";
import { agent, operator, project, url } from "./env.ts";

function reckonFor(p: string, run = "r1"): Reckon {
  return new Reckon({ project: p, runId: run, client: agent, guard: false });
}

async function types(p: string, run: string, op: string): Promise<string[]> {
  return (await operator.history({ project: p, runId: run, operationId: op })).map((e) => e.type + ((e.data as any).effect ? `:${(e.data as any).effect}` : ""));
}

test("a call that returns is recorded started then completed, and is not listed", async () => {
  const p = project("ok");
  const r = reckonFor(p);
  const refund = r.tool(async (a: { order: string }) => `refund R-1 for ${a.order}`, { name: "payments.refund" });
  assert.equal(await refund({ order: "5521" }), "refund R-1 for 5521");
  const hist = await operator.history({ project: p, runId: "r1", operationId: (await lastOp(p)) });
  assert.deepEqual(hist.map((e) => e.type), ["tool.started", "tool.completed"]);
  assert.deepEqual((hist[0].data as any).args, { order: "5521" });
  assert.equal((hist[1].data as any).result_summary, "refund R-1 for 5521");
  assert.deepEqual(await operator.allOperations({ project: p }), []);
});

test("a call that dies after its effect (dropped connection) is uncertain and listed", async () => {
  const p = project("dropped");
  const effects: string[] = [];
  const refund = tool(async (a: { order: string }) => {
    effects.push(a.order);
    throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
  }, { name: "payments.refund", project: p, runId: "r1", client: agent, guard: false });
  await assert.rejects(refund({ order: "5521" }), /socket hang up/);
  const ops = await operator.allOperations({ project: p });
  assert.equal(ops.length, 1);
  assert.equal(ops[0].state, "failed_uncertain");
  assert.equal(ops[0].failure?.effect, "uncertain");
  assert.equal(ops[0].failure?.error_type, "connection_lost");
  assert.deepEqual(effects, ["5521"]);
});

test("a timeout is uncertain", async () => {
  const p = project("timeout");
  // The signal has timed out before fetch is called, so fetch rejects with
  // the TimeoutError a slow call gets; a 0 ms timer may lose to a local answer.
  const expired = AbortSignal.timeout(1);
  await new Promise((r) => setTimeout(r, 20));
  const slow = tool(async (_a: unknown) => {
    await fetch(url + "/healthz", { signal: expired });
  }, { name: "slow.call", project: p, runId: "r1", client: agent, guard: false });
  await assert.rejects(slow({}));
  const ops = await operator.allOperations({ project: p });
  assert.equal(ops[0].failure?.error_type, "timeout");
  assert.equal(ops[0].failure?.effect, "uncertain");
});

test("a refused connection and a NoEffectError are none: settled, not listed", async () => {
  const p = project("none");
  const port = await closedPort();
  const r = reckonFor(p);
  const post = r.tool(async (_a: unknown) => fetch(`http://127.0.0.1:${port}/send`, { method: "POST", body: "x" }), { name: "email.send" });
  await assert.rejects(post({ to: "a" }));
  const validate = r.tool(async (a: { amount: number }) => {
    if (a.amount < 0) throw new NoEffectError("amount must be positive", { errorType: "argument_validation" });
  }, { name: "payments.refund" });
  await assert.rejects(validate({ amount: -1 }), NoEffectError);
  assert.deepEqual(await operator.allOperations({ project: p }), []);
  const failures = (await allEvents(p)).filter((e) => e.type === "tool.failed").map((e) => [(e.data as any).error_type, (e.data as any).effect]);
  assert.deepEqual(failures.sort(), [["argument_validation", "none"], ["connection_refused", "none"]]);
});

test("the tool does not run when its start cannot be recorded", async () => {
  const port = await closedPort();
  const down = new Client({ url: `http://127.0.0.1:${port}`, token: "x", attempts: 2, backoffMs: 1 });
  let ran = false;
  const t = tool(async (_a: unknown) => { ran = true; }, { name: "payments.refund", project: "p", runId: "r1", client: down, guard: false, source: "ag1" });
  await assert.rejects(t({}));
  assert.equal(ran, false);
});

test("the framework's call id is the operation id, and a replayed call id with other content runs nothing", async () => {
  const p = project("callid");
  const r = reckonFor(p);
  let runs = 0;
  assert.equal(await r.call("kv.put", { k: 1 }, async () => ++runs, { callId: "call_abc" }), 1);
  await new Promise((res) => setTimeout(res, 5)); // another ts: the same key with other content
  await assert.rejects(r.call("kv.put", { k: 2 }, async () => ++runs, { callId: "call_abc" }), /conflicts/);
  assert.equal(runs, 1);
  assert.deepEqual(await types(p, "r1", "call_abc"), ["tool.started", "tool.completed"]);
});

async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((res) => srv.listen(0, "127.0.0.1", res));
  const port = (srv.address() as { port: number }).port;
  await new Promise((res) => srv.close(res));
  return port;
}

async function lastOp(p: string): Promise<string> {
  const evs = await allEvents(p);
  return (evs.at(-1)!.data as any).operation_id;
}

async function allEvents(p: string) {
  const run = await operator.getRun("r1", { project: p, limit: 1000 });
  return run.events;
}

test("reportRun records the run's start and end", async () => {
  const p = project("runs");
  const r = reckonFor(p);
  await r.reportRun("run.started", { plan_summary: "refund order 5521" });
  await r.reportRun("run.completed");
  const run = await operator.getRun("r1", { project: p });
  assert.equal(run.status, "completed");
  assert.deepEqual(run.events.map((e) => e.type), ["run.started", "run.completed"]);
});
