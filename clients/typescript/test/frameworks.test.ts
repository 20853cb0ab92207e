// Real agents of the OpenAI Agents SDK and the Vercel AI SDK (the npm
// packages pinned in package-lock.json), driven by the scripted model,
// reporting through the adapters to a real reckon dev.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Agent, tool as agentsTool } from "@openai/agents";
import { generateText, stepCountIs, tool as aiTool } from "ai";
import { Reckon } from "../dist/index.js";
import { reckonTool } from "../dist/openai-agents.js";
import { reckonTools } from "../dist/ai-sdk.js";
import { agentsRunner, aiProvider, refundArgs, refundParams } from "./agents.ts";
import { agent, operator, project, requests, script, transcript } from "./env.ts";

/** A refund whose payment lands, then whose connection drops: the effect happened, the caller cannot know. */
function dyingRefund(effects: string[]) {
  return async (a: { order: string }): Promise<string> => {
    effects.push(a.order);
    throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
  };
}

test("OpenAI Agents SDK: a tool that dies after its effect leaves an uncertain operation keyed by the SDK's call id", async () => {
  const p = project("agents");
  const model = `agents-${randomUUID()}`;
  await script(model, [{ tool_calls: [{ name: "payments_refund", arguments: refundArgs }] }, { content: "I could not confirm the refund." }]);
  const effects: string[] = [];
  const reckon = new Reckon({ project: p, runId: "ticket-981", client: agent, guard: false });
  const refund = agentsTool(reckonTool({ name: "payments_refund", description: "Refund an order", parameters: refundParams, execute: dyingRefund(effects) }, reckon));
  const runner = agentsRunner();
  const result = await runner.run(new Agent({ name: "support", instructions: "Refund orders.", model, tools: [refund] }), "Refund order 5521");
  assert.equal(result.finalOutput, "I could not confirm the refund.");
  assert.deepEqual(effects, ["5521"]);
  const ops = await operator.allOperations({ project: p });
  assert.equal(ops.length, 1);
  assert.match(ops[0].operation_id, /^call_scripted_\d+$/);
  assert.equal(ops[0].state, "failed_uncertain");
  assert.deepEqual(ops[0].args, refundArgs);
  // The model is told not to repeat the call, not the SDK's "Please try again".
  assert.match(transcript(await requests(model)), /may already have taken effect/);
});

test("Vercel AI SDK: a tool that dies after its effect leaves an uncertain operation keyed by the SDK's toolCallId", async () => {
  const p = project("aisdk");
  const model = `aisdk-${randomUUID()}`;
  await script(model, [{ tool_calls: [{ name: "payments_refund", arguments: refundArgs }] }, { content: "I could not confirm the refund." }]);
  const effects: string[] = [];
  const provider = aiProvider();
  const result = await generateText({
    model: provider.chatModel(model),
    prompt: "Refund order 5521",
    tools: reckonTools({ payments_refund: aiTool({ description: "Refund an order", inputSchema: refundParams, execute: dyingRefund(effects) }) }, { project: p, runId: "ticket-981", client: agent, guard: false }),
    stopWhen: stepCountIs(5),
  });
  assert.equal(result.text, "I could not confirm the refund.");
  assert.deepEqual(effects, ["5521"]);
  const ops = await operator.allOperations({ project: p });
  assert.equal(ops.length, 1);
  assert.match(ops[0].operation_id, /^call_scripted_\d+$/);
  assert.equal(ops[0].state, "failed_uncertain");
  assert.equal(ops[0].failure?.error_type, "connection_lost");
  assert.match(transcript(await requests(model)), /may already have taken effect/);
});
