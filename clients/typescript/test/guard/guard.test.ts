// The retry guard and the verdict stream through the client, and the tool
// wrapper that asks the guard, against a real reckon dev.
import { test } from "node:test";
import assert from "node:assert/strict";
import { AlreadyDoneError, HeldError, Reckon, watchedOperation, type WatchEvent } from "../../dist/index.js";
import { agent, needGuardRoutes, operator, project } from "../env.ts";

const args = { order: "5521", amount_cents: 4200 };

/** A refund call that lands, then loses its connection: its operation is uncertain. */
async function uncertainCall(r: Reckon, effects: string[]): Promise<string> {
  const op = `call-${effects.length + 1}`;
  await assert.rejects(r.call("payments.refund", args, async () => {
    effects.push("refund");
    throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
  }, { callId: op }));
  return op;
}

test("the guard: proceed, hold while the first call is uncertain, done after it is settled occurred", async () => {
  await needGuardRoutes();
  const p = project("guard");
  const effects: string[] = [];
  const r = new Reckon({ project: p, runId: "r1", client: agent });
  assert.equal((await agent.guard({ project: p, runId: "r1", tool: "payments.refund", args })).decision, "proceed");
  const first = await uncertainCall(r, effects);

  const held = await agent.guard({ project: p, runId: "r1", tool: "payments.refund", args });
  assert.equal(held.decision, "hold");
  assert.equal(held.operation?.operation_id, first);
  // Other arguments are another effect.
  assert.equal((await agent.guard({ project: p, runId: "r1", tool: "payments.refund", args: { ...args, order: "5522" } })).decision, "proceed");

  // The wrapper does not run a held call; it records it blocked.
  await assert.rejects(r.call("payments.refund", args, async () => { effects.push("again"); }, { callId: "call-retry" }), (err: unknown) => {
    assert.ok(err instanceof HeldError);
    assert.equal(err.earlier?.operation_id, first);
    assert.match(err.message, new RegExp(`operation ${first} of run r1`));
    return true;
  });
  const blocked = await operator.history({ project: p, runId: "r1", operationId: "call-retry" });
  assert.deepEqual(blocked.map((e) => e.type), ["tool.started", "tool.blocked"]);
  // A replayed call id is held too, and its record does not settle the earlier operation.
  await assert.rejects(r.call("payments.refund", args, async () => { effects.push("replay"); }, { callId: first }), HeldError);
  assert.deepEqual((await operator.history({ project: p, runId: "r1", operationId: first })).map((e) => e.type), ["tool.started", "tool.failed"]);

  await operator.reconcile({ project: p, runId: "r1", operationId: first, effect: "occurred", note: "payments shows refund R-77" });
  const done = await agent.guard({ project: p, runId: "r1", tool: "payments.refund", args });
  assert.equal(done.decision, "done");
  assert.equal((done.reconciliation as any)?.actor, "operator:op");
  await assert.rejects(r.call("payments.refund", args, async () => { effects.push("third"); }), (err: unknown) => {
    assert.ok(err instanceof AlreadyDoneError);
    assert.match(err.message, /already happened.*settled "occurred".*decided by operator:op.*refund R-77/);
    return true;
  });
  assert.deepEqual(effects, ["refund"]);
});

test("the guard lets a call run again after the first was settled none", async () => {
  await needGuardRoutes();
  const p = project("guard-none");
  const effects: string[] = [];
  const r = new Reckon({ project: p, runId: "r1", client: agent });
  const first = await uncertainCall(r, effects);
  await operator.reconcile({ project: p, runId: "r1", operationId: first, effect: "none", note: "no refund on the dashboard" });
  assert.equal(await r.call("payments.refund", args, async () => { effects.push("again"); return "R-78"; }), "R-78");
  assert.deepEqual(effects, ["refund", "again"]);
});

test("the verdict stream delivers a ruling, and resumes after its cursor with Last-Event-ID", async () => {
  await needGuardRoutes();
  const p = project("watch");
  const r = new Reckon({ project: p, runId: "r1", client: agent, guard: false });
  const effects: string[] = [];
  const op1 = await uncertainCall(r, effects);
  const op2 = await uncertainCall(r, effects);

  const ctl = new AbortController();
  const stream = operator.watch({ project: p, signal: ctl.signal });
  const ready = (await stream.next()).value as WatchEvent;
  assert.equal(ready.event, "ready");
  await operator.reconcile({ project: p, runId: "r1", operationId: op1, effect: "occurred", note: "seen" });
  const ruling = await nextAbout(stream, op1);
  assert.equal(ruling.event, "operation.reconciled");
  assert.ok(ruling.id);
  ctl.abort();

  // While nobody listens, op2 is ruled; resuming after op1's ruling delivers it.
  await operator.reconcile({ project: p, runId: "r1", operationId: op2, effect: "none", note: "not seen" });
  const ctl2 = new AbortController();
  const resumed = operator.watch({ project: p, lastEventId: ruling.id, signal: ctl2.signal });
  const later = await nextAbout(resumed, op2);
  assert.equal((later.data as any).event.data.effect, "none");
  ctl2.abort();
});

test("waitForSettlement answers once an operator rules", async () => {
  await needGuardRoutes();
  const p = project("wait");
  const r = new Reckon({ project: p, runId: "r1", client: agent, guard: false });
  const op = await uncertainCall(r, []);
  const waiting = operator.waitForSettlement({ project: p, runId: "r1", operationId: op, signal: AbortSignal.timeout(20_000) });
  await operator.reconcile({ project: p, runId: "r1", operationId: op, effect: "occurred", note: "ledger entry L-9" });
  const settled = await waiting;
  assert.equal(settled.effect, "occurred");
  assert.equal(settled.note, "ledger entry L-9");
});

async function nextAbout(stream: AsyncGenerator<WatchEvent>, op: string): Promise<WatchEvent> {
  for (let it = await stream.next(); !it.done; it = await stream.next()) {
    if (watchedOperation(it.value) === op && it.value.event === "operation.reconciled") return it.value;
  }
  throw new Error(`the stream ended before a ruling on ${op}`);
}
