// The client's pure parts: the SSE parser, error classification, the
// settlement rule.
import { test } from "node:test";
import assert from "node:assert/strict";
import { classifyError, NoEffectError, parseSSE, settlementIn, type Event } from "../dist/index.js";

function stream(...chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({ start(c) { for (const s of chunks) c.enqueue(enc.encode(s)); c.close(); } });
}

test("parseSSE: events split across chunks, comments, CRLF, multi-line data, ids kept", async () => {
  const got = [];
  for await (const ev of parseSSE(stream(": keep-alive\n\nevent: ready\nid: 7\ndata: {\"cur", "sor\": 7}\n\n", "event: operation.reconciled\r\nid: 9\r\ndata: a\r\ndata: b\r\n\r\n"))) got.push(ev);
  assert.deepEqual(got, [
    { id: "7", event: "ready", data: { cursor: 7 } },
    { id: "9", event: "operation.reconciled", data: "a\nb" },
  ]);
});

test("classifyError: only proof that nothing was sent is none", () => {
  const cause = (code: string) => Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error(code), { code }) });
  assert.deepEqual(classifyError(new NoEffectError("bad amount", { errorType: "argument_validation" })), { effect: "none", errorType: "argument_validation" });
  assert.deepEqual(classifyError(cause("ECONNREFUSED")), { effect: "none", errorType: "connection_refused" });
  assert.deepEqual(classifyError(cause("ENOTFOUND")), { effect: "none", errorType: "not_reached" });
  assert.deepEqual(classifyError(cause("UND_ERR_HEADERS_TIMEOUT")), { effect: "uncertain", errorType: "timeout" });
  assert.deepEqual(classifyError(new DOMException("aborted", "TimeoutError")), { effect: "uncertain", errorType: "timeout" });
  assert.deepEqual(classifyError(cause("ECONNRESET")), { effect: "uncertain", errorType: "connection_lost" });
  assert.deepEqual(classifyError(new RangeError("boom")), { effect: "uncertain", errorType: "RangeError" });
  assert.deepEqual(classifyError(Object.assign(new Error("landed"), { reckonEffect: "occurred" })), { effect: "occurred", errorType: "tool_error" });
});

test("settlementIn: the newest settling event counts; unknown and uncertain do not settle", () => {
  const ev = (type: Event["type"], data: Record<string, unknown>) => ({ type, data: { operation_id: "op-1", ...data } }) as unknown as Event;
  assert.equal(settlementIn([ev("tool.started", {}), ev("tool.failed", { effect: "uncertain" })], "op-1"), undefined);
  assert.equal(settlementIn([ev("tool.started", {}), ev("operation.reconciled", { effect: "unknown" })], "op-1"), undefined);
  assert.equal(settlementIn([ev("operation.reconciled", { effect: "occurred", note: "n" })], "op-1")?.note, "n");
  assert.equal(settlementIn([ev("tool.completed", {})], "op-2"), undefined);
});
