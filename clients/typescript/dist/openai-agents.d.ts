import { Reckon, type ReckonOptions } from "./tool.js";
/** The part of @openai/agents' tool() options the adapter reads; everything else passes through. */
export interface AgentsToolOptions {
    name: string;
    execute: (input: any, runContext?: any, details?: {
        toolCall?: {
            callId?: string;
        };
    } & Record<string, unknown>) => unknown;
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
export declare function reckonTool<T extends AgentsToolOptions>(options: T, reckon: Reckon | ReckonOptions): T;
