// The loop closed for real agents of the OpenAI Agents SDK and the Vercel
// AI SDK: a tool that dies after its effect leaves an uncertain operation;
// the agent's retry is held and the tool does not run; after an operator's
// verdict the agent is told the effect happened, and the tool still ran
// once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Agent, tool as agentsTool } from "@openai/agents";
import { generateText, stepCountIs, tool as aiTool } from "ai";
import { Reckon } from "../../dist/index.js";
import { reckonTool } from "../../dist/openai-agents.js";
import { reckonTools } from "../../dist/ai-sdk.js";
import { agentsRunner, aiProvider, refundArgs, refundParams } from "../agents.ts";
import { agent, eventually, needGuardRoutes, operator, project, requests, script, transcript } from "../env.ts";

type RunAgent = (model: string, prompt: string, reckon: Reckon, refund: (a: { order: string }) => Promise<string>) => Promise<string>;

async function closeTheLoop(name: string, runAgent: RunAgent): Promise<void> {
  await needGuardRoutes();
  const p = project(name);
  const model = `${name}-${randomUUID()}`;
  const reckon = new Reckon({ project: p, runId: "ticket-981", client: agent });
  const effects: string[] = [];
  const refund = async (a: { order: string }): Promise<string> => {
    effects.push(a.order);
    throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
  };
  const call = { tool_calls: [{ name: "payments_refund", arguments: refundArgs }] };

  // The refund lands and its answer is lost; the model calls it again.
  await script(model, [call, call, { content: "Waiting for the refund's verdict." }]);
  assert.equal(await runAgent(model, "Refund order 5521", reckon, refund), "Waiting for the refund's verdict.");
  assert.deepEqual(effects, ["5521"], "the held retry must not run the tool");
  assert.match(transcript(await requests(model)), /Not run: an identical earlier call \(operation call_scripted_\d+ of run ticket-981\)/);
  const [uncertain] = await operator.allOperations({ project: p });
  assert.equal(uncertain.state, "failed_uncertain");

  // An operator checks the payments dashboard; the verdict reaches the stream.
  const settled = operator.waitForSettlement({ project: p, runId: "ticket-981", operationId: uncertain.operation_id, signal: AbortSignal.timeout(20_000) });
  await operator.reconcile({ project: p, runId: "ticket-981", operationId: uncertain.operation_id, effect: "occurred", note: "dashboard shows refund R-77" });
  assert.equal((await settled).effect, "occurred");

  // Asked again, the agent calls the refund once more and is told it happened.
  await script(model, [call, { content: "The refund already went through." }]);
  assert.equal(await runAgent(model, "Is order 5521 refunded?", reckon, refund), "The refund already went through.");
  assert.match(transcript(await requests(model)), /this effect already happened.*dashboard shows refund R-77/);
  assert.deepEqual(effects, ["5521"], "the answered call must not run the tool");
  await eventually(async () => assert.deepEqual(await operator.allOperations({ project: p }), []));
}

test("OpenAI Agents SDK: uncertain, the retry held, then told the effect happened", async () => {
  const runner = agentsRunner();
  await closeTheLoop("agents", async (model, prompt, reckon, refund) => {
    const t = agentsTool(reckonTool({ name: "payments_refund", description: "Refund an order", parameters: refundParams, execute: refund }, reckon));
    const result = await runner.run(new Agent({ name: "support", instructions: "Refund orders.", model, tools: [t] }), prompt);
    return String(result.finalOutput);
  });
});

test("Vercel AI SDK: uncertain, the retry held, then told the effect happened", async () => {
  const provider = aiProvider();
  await closeTheLoop("aisdk", async (model, prompt, reckon, refund) => {
    const result = await generateText({
      model: provider.chatModel(model),
      prompt,
      tools: reckonTools({ payments_refund: aiTool({ description: "Refund an order", inputSchema: refundParams, execute: refund }) }, reckon),
      stopWhen: stepCountIs(5),
    });
    return result.text;
  });
});
