// The OpenAI Agents SDK (@openai/agents) adapter: wraps the options of a
// function tool, so the SDK's own tool() builds the tool.
import { Reckon, NotRunError, failureMessage, type ReckonOptions } from "./tool.js";

/** The part of @openai/agents' tool() options the adapter reads; everything else passes through. */
export interface AgentsToolOptions {
  name: string;
  execute: (input: any, runContext?: any, details?: { toolCall?: { callId?: string } } & Record<string, unknown>) => unknown;
  errorFunction?: ((...args: any[]) => unknown) | null;
  [key: string]: unknown;
}

/**
 * Wraps the options of an Agents SDK function tool:
 * `tool(reckonTool({name, description, parameters, execute}, reckon))`.
 * Each call is keyed by the SDK's call id, asks the retry guard, and is
 * recorded before and after it runs. A held call, or one whose effect
 * already happened, is not run: the model is told why. A failure whose
 * effect is uncertain tells the model not to retry it.
 */
export function reckonTool<T extends AgentsToolOptions>(options: T, reckon: Reckon | ReckonOptions): T {
  const r = reckon instanceof Reckon ? reckon : new Reckon(reckon);
  const execute: AgentsToolOptions["execute"] = async (input, runContext, details) => {
    try {
      return await r.call(options.name, input, () => options.execute(input, runContext, details), { callId: details?.toolCall?.callId });
    } catch (err) {
      if (err instanceof NotRunError) return err.message;
      throw err;
    }
  };
  return {
    ...options,
    execute,
    // The SDK's default answer to a tool error is "Please try again",
    // which for an uncertain effect invites the duplicate.
    errorFunction: options.errorFunction !== undefined ? options.errorFunction : (_ctx: unknown, err: unknown) => failureMessage(err),
  };
}
