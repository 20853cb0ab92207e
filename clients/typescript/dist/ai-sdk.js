// The Vercel AI SDK (ai) adapter: wraps the execute of each tool of a tool
// set, so the SDK's own tool() builds the tools.
import { Reckon, NotRunError, failureMessage } from "./tool.js";
/**
 * Wraps every tool of an AI SDK tool set:
 * `generateText({model, tools: reckonTools({refund: tool({...})}, reckon)})`.
 * Each call is keyed by the SDK's toolCallId, asks the retry guard, and is
 * recorded before and after it runs; the tool set's key is the tool's
 * name. A held call, or one whose effect already happened, is not run: the
 * model is told why; a failure tells the model whether repeating it is safe.
 */
export function reckonTools(tools, reckon) {
    const r = reckon instanceof Reckon ? reckon : new Reckon(reckon);
    const out = {};
    for (const [name, t] of Object.entries(tools)) {
        const execute = t.execute;
        if (!execute) {
            out[name] = t; // executed by the provider or the client: nothing runs here
            continue;
        }
        out[name] = {
            ...t,
            execute: async (input, options) => {
                try {
                    return await r.call(name, input, () => execute(input, options), { callId: options?.toolCallId });
                }
                catch (err) {
                    if (err instanceof NotRunError)
                        return err.message;
                    // The SDK shows the model the error's message: say whether
                    // repeating the call is safe.
                    throw new Error(failureMessage(err), { cause: err });
                }
            },
        };
    }
    return out;
}
