import { Reckon, type ReckonOptions } from "./tool.js";
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
export declare function reckonTools<T extends Record<string, any>>(tools: T, reckon: Reckon | ReckonOptions): T;
