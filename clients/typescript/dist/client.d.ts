import type { components, operations } from "./api.js";
/** Schemas of the API, as the OpenAPI document describes them. */
export type Schemas = components["schemas"];
/** One journal event. */
export type Event = Schemas["Event"];
/** The key of an event: (source_id, event_id). */
export type EventKey = Schemas["EventKey"];
/** The answer to one ingested event: accepted, repeated or conflict. */
export type IngestResult = Schemas["IngestResult"];
/** One unsettled operation of the listing. */
export type Operation = Schemas["Operation"];
/** One page of the listing. */
export type OperationsPage = Schemas["OperationsPage"];
/** One entry of the operator's queue. */
export type AttentionItem = Schemas["AttentionItem"];
/** One page of the operator's queue. */
export type AttentionPage = Schemas["AttentionPage"];
/** A run and one page of its events. */
export type Run = Schemas["Run"];
/** A plan of a kernel run. */
export type Plan = Schemas["Plan"];
/** The body of a reconcile request. */
export type ReconcileRequest = Schemas["ReconcileRequest"];
/** The supervisor's verdicts and their resolutions. */
export type VerdictsPage = operations["listVerdicts"]["responses"][200]["content"]["application/json"];
/** The caller's token: its name and role. */
export type WhoAmI = operations["whoami"]["responses"][200]["content"]["application/json"];
/** What the retry guard decided about a call. */
export type GuardDecision = "proceed" | "hold" | "done";
/** The retry guard's answer (POST /v1/agent/operations/guard). */
export interface GuardAnswer {
    /** proceed: no earlier twin holds the call; hold: an identical call is unsettled; done: an identical call was settled occurred. */
    decision: GuardDecision;
    /** The earlier operation with the same effect key (hold and done). */
    operation?: Record<string, unknown> & {
        operation_id?: string;
        run_id?: string;
    };
    /** The settlement that says the effect occurred (done). */
    reconciliation?: Record<string, unknown>;
}
/** A request to the retry guard. */
export interface GuardRequest {
    project: string;
    /** The run asking; the guard may journal against it. */
    runId?: string;
    tool: string;
    args: unknown;
    /** Where identical calls are looked for: the whole project (the server's default) or this run. */
    scope?: "project" | "run";
}
/**
 * One Server-Sent Event of the verdict stream. The first is named ready
 * ({project, run_id, cursor}); every other is named by its journal type
 * (operation.reconciled, supervisor.verdict, tool.failed, run.awaiting,
 * run.resumed) with data {cursor, seq, attention, event}.
 */
export interface WatchEvent {
    /** The stream's cursor after this event; resuming with it as Last-Event-ID continues after it. */
    id?: string;
    /** The SSE event name. */
    event: string;
    /** The event's data, parsed as JSON when it is JSON. */
    data: unknown;
}
/** Options of a Client. */
export interface ClientOptions {
    /** The API's base URL; default RECKON_URL, else http://127.0.0.1:8080. */
    url?: string;
    /** A bearer token; default RECKON_TOKEN. */
    token?: string;
    /** The fetch to use (default globalThis.fetch). */
    fetch?: typeof fetch;
    /** Attempts of a request that failed in transit or got 408, 429 or 5xx (default 5). */
    attempts?: number;
    /** The first pause between attempts in ms, doubled each time (default 200). */
    backoffMs?: number;
    /** Per-attempt timeout in ms (default 30000). */
    timeoutMs?: number;
}
/** An error answer of the API: its status, message and, for an event of a batch, the event's index. */
export declare class ReckonError extends Error {
    /** The HTTP status. */
    readonly status: number;
    /** The refused event's index in the batch, when the answer names one. */
    readonly eventIndex?: number;
    constructor(status: number, message: string, eventIndex?: number);
}
type Query = Record<string, string | number | undefined | null>;
/**
 * A client of reckon's HTTP API. Every write it retries sends the same
 * bytes again, so a retried ingest is answered `repeated`, never stored twice.
 */
export declare class Client {
    /** The API's base URL, without a trailing slash. */
    readonly url: string;
    private readonly token?;
    private readonly fetchImpl;
    private readonly attempts;
    private readonly backoffMs;
    private readonly timeoutMs;
    private whoamiPromise?;
    constructor(opts?: ClientOptions);
    /** Sends one request, retrying transit failures and 408/429/5xx with the same body. */
    request<T>(method: string, path: string, opts?: {
        query?: Query;
        body?: unknown;
        headers?: Record<string, string>;
    }): Promise<T>;
    private send;
    /** The caller's token: its name (the source it writes events under) and role. */
    whoami(): Promise<WhoAmI>;
    /**
     * Ingests events, each answered accepted, repeated or conflict, in
     * batches of at most 1,000 (the API's limit per request). A batch is
     * retried with the same bytes, so a retry after a lost answer is
     * answered repeated.
     */
    ingest(events: Event[]): Promise<IngestResult[]>;
    /** Starts a kernel run from a plan (operator). */
    startRun(req: {
        project: string;
        runId?: string;
        plan: Plan;
    }): Promise<{
        project: string;
        run_id: string;
    }>;
    /** A run and one page of its events. */
    getRun(runId: string, q: {
        project: string;
        cursor?: string;
        limit?: number;
    }): Promise<Run>;
    /** One page of the unsettled operations of a project (or one run). */
    listOperations(q: {
        project: string;
        runId?: string;
        cursor?: string;
        limit?: number;
    }): Promise<OperationsPage>;
    /** Every unsettled operation of a project (or one run), following the pages. */
    allOperations(q: {
        project: string;
        runId?: string;
    }): Promise<Operation[]>;
    /** The events of one operation, its reconciliations included, in order. */
    history(q: {
        project: string;
        runId: string;
        operationId: string;
    }): Promise<Event[]>;
    /** One page of the operator's queue. */
    attention(q: {
        project: string;
        runId?: string;
        cursor?: string;
        limit?: number;
    }): Promise<AttentionPage>;
    /** Records an operator's ruling on an operation (operator); the answer is the operation.reconciled event. */
    reconcile(req: {
        project: string;
        runId: string;
        operationId: string;
        effect: "none" | "occurred" | "unknown";
        note: string;
        evidence?: unknown;
    }, opts?: {
        idempotencyKey?: string;
    }): Promise<Event>;
    /** The supervisor's verdicts, newest first, with their resolutions. */
    verdicts(q: {
        project: string;
        runId?: string;
        since?: string;
        limit?: number;
    }): Promise<VerdictsPage>;
    /** The projects the journal knows. */
    projects(): Promise<{
        projects: string[];
        truncated: boolean;
    }>;
    /**
     * Asks the retry guard whether a call may run: proceed, hold (an
     * identical call is unsettled) or done (an identical call was settled
     * occurred). A server without the guard answers 404, a ReckonError.
     */
    guard(req: GuardRequest): Promise<GuardAnswer>;
    /**
     * The verdict stream: settlements and attention changes of a project (or
     * one run) as they happen. A dropped connection is resumed with
     * Last-Event-ID, so no event is lost or seen twice; the iteration ends
     * when signal aborts.
     */
    watch(q: {
        project: string;
        runId?: string;
        lastEventId?: string;
        signal?: AbortSignal;
    }): AsyncGenerator<WatchEvent>;
    /**
     * Waits on the verdict stream until the operation is settled, and answers
     * the settling event's data. Reads the history once first, so a verdict
     * recorded before the call is not waited for.
     */
    waitForSettlement(q: {
        project: string;
        runId: string;
        operationId: string;
        signal?: AbortSignal;
    }): Promise<Record<string, unknown>>;
}
/** The operation a verdict stream event is about: its journal event's data.operation_id. */
export declare function watchedOperation(ev: WatchEvent): string | undefined;
/** The data of the event that settles an operation, from its history; undefined while it is unsettled. */
export declare function settlementIn(events: Event[], operationId: string): Record<string, unknown> | undefined;
/** Parses a text/event-stream body into events (the WHATWG rules: id, event, data lines; a blank line ends an event). */
export declare function parseSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<WatchEvent>;
export {};
