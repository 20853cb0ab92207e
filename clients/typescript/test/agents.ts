// What the framework tests share: the refund tool's arguments and schema,
// and each framework pointed at the scripted model.
import { OpenAIProvider, Runner, setTracingDisabled } from "@openai/agents";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { z } from "zod";
import { modelURL } from "./env.ts";

// No trace export: it would try to reach OpenAI.
setTracingDisabled(true);

/** The arguments the scripted model calls the refund with. */
export const refundArgs = { order: "5521", amount_cents: 4200 };
/** The refund tool's parameters. */
export const refundParams = z.object({ order: z.string(), amount_cents: z.number() });

/** An OpenAI Agents SDK runner whose models are the scripted model's (chat completions). */
export function agentsRunner(): Runner {
  return new Runner({ modelProvider: new OpenAIProvider({ baseURL: modelURL(), apiKey: "scripted", useResponses: false }) });
}

/** A Vercel AI SDK provider for the scripted model. */
export function aiProvider() {
  return createOpenAICompatible({ name: "scripted", baseURL: modelURL(), apiKey: "scripted" });
}
