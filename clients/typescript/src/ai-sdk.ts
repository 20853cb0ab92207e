// The Vercel AI SDK (ai) adapter: wraps the execute of each tool of a tool
// set, so the SDK's own tool() builds the tools.
import { Reckon, NotRunError, failureMessage, type ReckonOptions } from "./tool.js";

/** The part of an AI SDK tool the adapter reads; everything else passes through. */
export interface AiTool {
  execute?: (input: any, options: any) => unknown;
}

/**
 * Wraps every tool of an AI SDK tool set:
 * `generateText({model, tools: reckonTools({refund: tool({...})}, reckon)})`.
 * Each call is keyed by the SDK's toolCallId, asks the retry guard, and is
 * recorded before and after it runs; the tool set's key is the tool's
 * name. A held call, or one whose effect already happened, is not run: the
 * model is told why; a failure tells the model whether repeating it is safe.
 */
export function reckonTools<T extends Record<string, any>>(tools: T, reckon: Reckon | ReckonOptions): T {
  const r = reckon instanceof Reckon ? reckon : new Reckon(reckon);
  const out: Record<string, AiTool> = {};
  for (const [name, t] of Object.entries(tools) as [string, AiTool][]) {
    const execute = t.execute;
    if (!execute) {
      out[name] = t; // executed by the provider or the client: nothing runs here
      continue;
    }
    out[name] = {
      ...t,
      execute: async (input: unknown, options: { toolCallId?: string } | undefined) => {
        try {
          return await r.call(name, input, () => execute(input, options), { callId: options?.toolCallId });
        } catch (err) {
          if (err instanceof NotRunError) return err.message;
          // The SDK shows the model the error's message: say whether
          // repeating the call is safe.
          throw new Error(failureMessage(err), { cause: err });
        }
      },
    };
  }
  return out as T;
}
