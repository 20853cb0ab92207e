// What the tests need from scripts/test-clients.sh: a real `reckon dev`
// (RECKON_URL), an agent and an operator token, and the scripted model.
import { randomUUID } from "node:crypto";
import { Client } from "../dist/index.js";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through scripts/test-clients.sh (make test-clients), which starts reckon dev`);
  return v;
}

/** The API of the reckon dev under test. */
export const url = need("RECKON_URL");
/** A client with the agent token (name ag1: the source its events are written under). */
export const agent = new Client({ url, token: need("RECKON_TEST_AGENT_TOKEN") });
/** A client with the operator token. */
export const operator = new Client({ url, token: need("RECKON_TEST_OPERATOR_TOKEN") });

/** A project of its own, so tests never see each other's operations. */
export function project(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** The scripted model's base URL (ends in /v1). */
export function modelURL(): string {
  return need("RECKON_TEST_MODEL_URL");
}

/** A scripted model step: tool calls, or a final text. */
export type Step = { tool_calls?: { name: string; arguments: unknown }[]; content?: string };

/** Queues steps for a model name of the scripted model. */
export async function script(model: string, steps: Step[]): Promise<void> {
  const body = { model, steps: steps.map((s) => ({ ...s, tool_calls: s.tool_calls?.map((c) => ({ name: c.name, arguments: c.arguments })) })) };
  const res = await fetch(modelURL().replace(/\/v1$/, "") + "/script", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`scripted model: ${res.status} ${await res.text()}`);
}

/** The chat requests a model name received, in order. */
export async function requests(model: string): Promise<any[]> {
  const res = await fetch(modelURL().replace(/\/v1$/, "") + "/requests?model=" + encodeURIComponent(model));
  return ((await res.json()) as { requests: any[] }).requests;
}

/** Every message text a model was sent (tool results included), joined. */
export function transcript(reqs: any[]): string {
  return JSON.stringify(reqs.at(-1)?.messages ?? []);
}

/**
 * Retries check until it passes or limitMs ends: a ruling reaches the
 * listing through reckon's outbox, a moment after the API answered.
 */
export async function eventually<T>(check: () => Promise<T>, limitMs = 10_000): Promise<T> {
  const end = Date.now() + limitMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > end) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

let routes: Promise<void> | undefined;

/**
 * Fails, naming the route, when the server lacks the retry guard or the
 * verdict stream: the tests of test/guard need both.
 */
export function needGuardRoutes(): Promise<void> {
  routes ??= (async () => {
    const missing: string[] = [];
    const g = await fetch(url + "/v1/agent/operations/guard", {
      method: "POST",
      headers: { Authorization: `Bearer ${process.env.RECKON_TEST_OPERATOR_TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ project: "route-check", tool: "t", args: {} }),
    });
    await g.text();
    if (g.status === 404) missing.push("POST /v1/agent/operations/guard");
    const ctl = new AbortController();
    const w = await fetch(url + "/v1/agent/operations/watch?project=route-check", {
      headers: { Authorization: `Bearer ${process.env.RECKON_TEST_OPERATOR_TOKEN}` },
      signal: ctl.signal,
    });
    if (w.status === 404) missing.push("GET /v1/agent/operations/watch");
    ctl.abort();
    if (missing.length) {
      throw new Error(`this reckon has no ${missing.join(" and no ")} (404): the retry guard and verdict stream tests need them on the server under test`);
    }
  })();
  return routes;
}
