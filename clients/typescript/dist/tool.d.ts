import { Client, type GuardAnswer } from "./client.js";
/** The effect a failed call had: none (nothing was sent), uncertain, or occurred. */
export type Effect = "none" | "uncertain" | "occurred";
/** How a wrapped tool reports and guards its calls. */
export interface ReckonOptions {
    /** The project the calls belong to. */
    project: string;
    /** The run the calls belong to (an agent's conversation, a ticket, a job). */
    runId: string;
    /** The client to report through; default a Client from RECKON_URL and RECKON_TOKEN. */
    client?: Client;
    /** Ask the retry guard before each call (default true). */
    guard?: boolean;
    /** Where the guard looks for identical calls: "project" (default) or "run". */
    scope?: "project" | "run";
    /** The source events are written under; default the token's name (GET /v1/whoami). */
    source?: string;
    /**
     * Classifies a tool's error when the defaults cannot: answer "none" for an
     * error raised before anything was sent, "occurred" when the effect is
     * known to have landed, undefined to keep the default.
     */
    classify?: (err: unknown) => Effect | undefined;
    /** Called when a call's end could not be reported (the call's own result is still returned). */
    onReportError?: (err: unknown) => void;
}
/** Per-call options. */
export interface CallOptions {
    /** The framework's id of the call; it becomes the operation id. */
    callId?: string;
}
/**
 * Throw it (or an error whose `reckonEffect` is "none") from a tool to say
 * the call was refused before anything was sent: the operation is recorded
 * settled with effect none, and repeating it is safe.
 */
export declare class NoEffectError extends Error {
    /** The error_type recorded (default "rejected_before_sending"). */
    readonly errorType: string;
    constructor(message: string, opts?: {
        errorType?: string;
        cause?: unknown;
    });
}
/** A call the retry guard did not let run; its message is written for the model. */
export declare class NotRunError extends Error {
    /** hold or done. */
    readonly decision: "hold" | "done";
    /** The earlier operation with the same tool and arguments. */
    readonly earlier: GuardAnswer["operation"];
    /** The settlement of the earlier operation (done). */
    readonly reconciliation?: GuardAnswer["reconciliation"];
    /** The operation recorded for this call (tool.started + tool.blocked). */
    readonly operationId: string;
    constructor(decision: "hold" | "done", message: string, answer: GuardAnswer, operationId: string);
}
/** The guard held the call: an identical call is unsettled; repeating it now could repeat its effect. */
export declare class HeldError extends NotRunError {
    constructor(answer: GuardAnswer, operationId: string);
}
/** The guard answered the call: an identical call was settled occurred, so its effect already happened. */
export declare class AlreadyDoneError extends NotRunError {
    constructor(answer: GuardAnswer, operationId: string);
}
/**
 * The effect and error_type of a tool's error. Only a failure that shows
 * nothing was sent (a refused or unresolvable connection, a NoEffectError)
 * is none; a timeout, a dropped connection and anything unknown are
 * uncertain, because the call may have landed.
 */
export declare function classifyError(err: unknown): {
    effect: Effect;
    errorType: string;
};
/** What the model is told about a failed call. */
export declare function failureMessage(err: unknown): string;
/**
 * Reports and guards the tool calls of one run. `tool(fn, {name})` wraps a
 * function; `call(name, args, run)` wraps one call; the framework adapters
 * use call with the framework's call id.
 */
export declare class Reckon {
    /** The client calls are reported through. */
    readonly client: Client;
    /** The options. */
    readonly options: ReckonOptions;
    constructor(options: ReckonOptions);
    private source;
    /** The event key of one of an operation's events: stable, so a resent event is answered repeated. */
    private eventId;
    /** An event of this run; key is the operation id (or "run") its event id is made of. */
    private runEvent;
    /** An event of one operation. */
    private event;
    /** Sends events; a conflict (the same key with other content) is an error, nothing being overwritten. */
    private record;
    /** Records a run event of this run (run.started, run.completed or run.failed). */
    reportRun(type: "run.started" | "run.completed" | "run.failed", data?: Record<string, unknown>): Promise<void>;
    private askGuard;
    /**
     * Runs one call of tool `name`: asks the guard (a held or answered call
     * is recorded as tool.blocked and throws HeldError or AlreadyDoneError
     * without running), records tool.started, runs `run`, and records
     * tool.completed or tool.failed with the effect classifyError (or the
     * classify option) gives. The tool's own error is rethrown.
     */
    call<T>(name: string, args: unknown, run: () => Promise<T> | T, opts?: CallOptions): Promise<T>;
    private failed;
    /** Reports a call's end; the tool already ran, so a failure to report is passed to onReportError, not thrown. */
    private reportEnd;
    /** Journals a held or answered call: tool.started and tool.blocked naming the earlier operation, in one batch. */
    private recordBlocked;
    /**
     * Wraps fn so that each call is guarded and reported as tool `name`. The
     * wrapper takes fn's arguments; the first one is recorded as the call's
     * args.
     */
    tool<A extends unknown[], R>(fn: (...args: A) => Promise<R> | R, opts?: {
        name?: string;
    }): (...args: A) => Promise<R>;
}
/**
 * Wraps fn as a reported, guarded tool of one run:
 * `const refund = tool(refundFn, {name: "payments.refund", project: "acme", runId: "ticket-981"})`.
 */
export declare function tool<A extends unknown[], R>(fn: (...args: A) => Promise<R> | R, opts: ReckonOptions & {
    name?: string;
}): (...args: A) => Promise<R>;
