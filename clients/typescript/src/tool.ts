// Tool wrappers: every call of a wrapped tool asks the retry guard, records
// tool.started before it runs, and tool.completed or tool.failed (with an
// honest effect) after it. The framework adapters (openai-agents.ts,
// ai-sdk.ts) build on Reckon.call.
import { createHash, randomUUID } from "node:crypto";
import { Client, ReckonError, type Event, type GuardAnswer } from "./client.js";

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
export class NoEffectError extends Error {
  /** The error_type recorded (default "rejected_before_sending"). */
  readonly errorType: string;
  constructor(message: string, opts: { errorType?: string; cause?: unknown } = {}) {
    super(message, { cause: opts.cause });
    this.name = "NoEffectError";
    this.errorType = opts.errorType ?? "rejected_before_sending";
  }
}

/** A call the retry guard did not let run; its message is written for the model. */
export class NotRunError extends Error {
  /** hold or done. */
  readonly decision: "hold" | "done";
  /** The earlier operation with the same tool and arguments. */
  readonly earlier: GuardAnswer["operation"];
  /** The settlement of the earlier operation (done). */
  readonly reconciliation?: GuardAnswer["reconciliation"];
  /** The operation recorded for this call (tool.started + tool.blocked). */
  readonly operationId: string;
  constructor(decision: "hold" | "done", message: string, answer: GuardAnswer, operationId: string) {
    super(message);
    this.decision = decision;
    this.earlier = answer.operation;
    this.reconciliation = answer.reconciliation;
    this.operationId = operationId;
  }
}

/** The guard held the call: an identical call is unsettled; repeating it now could repeat its effect. */
export class HeldError extends NotRunError {
  constructor(answer: GuardAnswer, operationId: string) {
    super("hold", heldMessage(answer), answer, operationId);
    this.name = "HeldError";
  }
}

/** The guard answered the call: an identical call was settled occurred, so its effect already happened. */
export class AlreadyDoneError extends NotRunError {
  constructor(answer: GuardAnswer, operationId: string) {
    super("done", doneMessage(answer), answer, operationId);
    this.name = "AlreadyDoneError";
  }
}

function earlierName(a: GuardAnswer): string {
  const op = a.operation ?? {};
  const id = String(op.operation_id ?? "?");
  return op.run_id ? `operation ${id} of run ${String(op.run_id)}` : `operation ${id}`;
}

function heldMessage(a: GuardAnswer): string {
  return `Not run: an identical earlier call (${earlierName(a)}) may already have had this effect, and reckon is reconciling it. ` +
    "Do not retry this call now; wait for its verdict or ask an operator.";
}

function doneMessage(a: GuardAnswer): string {
  const r = (a.reconciliation ?? {}) as Record<string, unknown>;
  const d = ((r.data as Record<string, unknown> | undefined) ?? r) as Record<string, unknown>;
  const who = [d.basis ? `basis ${String(d.basis)}` : "", r.actor ? `decided by ${String(r.actor)}` : ""].filter(Boolean).join(", ");
  const note = d.note ? `: ${String(d.note)}` : "";
  return `Not run: this effect already happened. An identical earlier call (${earlierName(a)}) was settled "occurred"` +
    (who ? ` (${who})` : "") + `${note}. Do not repeat it.`;
}

const beforeSending = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "ERR_INVALID_URL"]);
const timeouts = new Set(["ETIMEDOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
const dropped = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "ECONNABORTED"]);

/**
 * The effect and error_type of a tool's error. Only a failure that shows
 * nothing was sent (a refused or unresolvable connection, a NoEffectError)
 * is none; a timeout, a dropped connection and anything unknown are
 * uncertain, because the call may have landed.
 */
export function classifyError(err: unknown): { effect: Effect; errorType: string } {
  const marked = (err as { reckonEffect?: Effect } | null)?.reckonEffect;
  if (err instanceof NoEffectError) return { effect: "none", errorType: err.errorType };
  if (marked) return { effect: marked, errorType: (err as { errorType?: string }).errorType ?? "tool_error" };
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: string }).code;
    const name = (e as { name?: string }).name;
    if (code && beforeSending.has(code)) return { effect: "none", errorType: code === "ECONNREFUSED" ? "connection_refused" : "not_reached" };
    if ((code && timeouts.has(code)) || name === "TimeoutError" || name === "AbortError") return { effect: "uncertain", errorType: "timeout" };
    if (code && dropped.has(code)) return { effect: "uncertain", errorType: "connection_lost" };
  }
  return { effect: "uncertain", errorType: (err as { name?: string })?.name || "tool_error" };
}

/** What the model is told about a failed call. */
export function failureMessage(err: unknown): string {
  const { effect } = classifyError(err);
  const text = err instanceof Error ? err.message : String(err);
  if (effect === "none") return `The tool call failed before anything was sent (${text}); it is safe to call it again.`;
  return `The tool call failed (${text}) and may already have taken effect; reckon is reconciling it. Do not repeat it until its verdict is known.`;
}

/** A bounded summary of a tool's result for tool.completed. */
function summarize(result: unknown): string {
  let s: string;
  try {
    s = typeof result === "string" ? result : JSON.stringify(result) ?? String(result);
  } catch {
    s = String(result);
  }
  return s.length > 500 ? s.slice(0, 497) + "..." : s;
}

function errorText(err: unknown): string {
  const s = err instanceof Error ? err.message || err.name : String(err);
  return (s || "error").slice(0, 2000);
}

/**
 * Reports and guards the tool calls of one run. `tool(fn, {name})` wraps a
 * function; `call(name, args, run)` wraps one call; the framework adapters
 * use call with the framework's call id.
 */
export class Reckon {
  /** The client calls are reported through. */
  readonly client: Client;
  /** The options. */
  readonly options: ReckonOptions;

  constructor(options: ReckonOptions) {
    if (!options.project) throw new Error("reckon: project is required");
    if (!options.runId) throw new Error("reckon: runId is required");
    this.options = options;
    this.client = options.client ?? new Client();
  }

  private async source(): Promise<string> {
    return this.options.source ?? (await this.client.whoami()).name;
  }

  /** The event key of one of an operation's events: stable, so a resent event is answered repeated. */
  private eventId(operationId: string, what: string): string {
    const id = `${this.options.project}/${this.options.runId}/${operationId}/${what}`;
    if (Buffer.byteLength(id) <= 512) return id;
    return `sha256:${createHash("sha256").update(id).digest("hex")}/${what}`;
  }

  /** An event of this run; key is the operation id (or "run") its event id is made of. */
  private runEvent(source: string, key: string, what: string, type: Event["type"], data: Record<string, unknown>): Event {
    return {
      source_id: source,
      event_id: this.eventId(key, what),
      project: this.options.project,
      run_id: this.options.runId,
      type,
      ts: new Date().toISOString(),
      actor: "agent",
      data,
    };
  }

  /** An event of one operation. */
  private event(source: string, operationId: string, what: string, type: Event["type"], data: Record<string, unknown>): Event {
    return this.runEvent(source, operationId, what, type, { operation_id: operationId, ...data });
  }

  /** Sends events; a conflict (the same key with other content) is an error, nothing being overwritten. */
  private async record(events: Event[]): Promise<void> {
    const results = await this.client.ingest(events);
    const conflict = results.find((r) => r.status === "conflict");
    if (conflict) {
      throw new ReckonError(409, `event ${conflict.source_id}/${conflict.event_id} conflicts with one already recorded: ${conflict.reason ?? "other content under the same key"}`);
    }
  }

  /** Records a run event of this run (run.started, run.completed or run.failed). */
  async reportRun(type: "run.started" | "run.completed" | "run.failed", data: Record<string, unknown> = {}): Promise<void> {
    await this.record([this.runEvent(await this.source(), "run", type.slice(4), type, data)]);
  }

  private async askGuard(name: string, args: unknown): Promise<GuardAnswer> {
    try {
      return await this.client.guard({ project: this.options.project, runId: this.options.runId, tool: name, args, scope: this.options.scope });
    } catch (err) {
      if (err instanceof ReckonError && err.status === 404) {
        throw new Error(`reckon: ${this.client.url} has no retry guard (POST /v1/agent/operations/guard answered 404); upgrade reckon, or pass guard: false to report calls without asking`, { cause: err });
      }
      throw err;
    }
  }

  /**
   * Runs one call of tool `name`: asks the guard (a held or answered call
   * is recorded as tool.blocked and throws HeldError or AlreadyDoneError
   * without running), records tool.started, runs `run`, and records
   * tool.completed or tool.failed with the effect classifyError (or the
   * classify option) gives. The tool's own error is rethrown.
   */
  async call<T>(name: string, args: unknown, run: () => Promise<T> | T, opts: CallOptions = {}): Promise<T> {
    args = args ?? {};
    const operationId = opts.callId ?? randomUUID();
    const source = await this.source();
    if (this.options.guard !== false) {
      const answer = await this.askGuard(name, args);
      if (answer.decision === "hold" || answer.decision === "done") {
        // A framework replaying a call replays its call id: the earlier
        // operation may be this very id, and a tool.blocked under it would
        // settle it. The blocked call gets an id of its own then.
        const own = answer.operation?.operation_id === operationId && answer.operation?.run_id === this.options.runId
          ? `${operationId}/retry-${randomUUID()}` : operationId;
        const blocked = answer.decision === "hold" ? new HeldError(answer, own) : new AlreadyDoneError(answer, own);
        await this.recordBlocked(source, name, args, own, answer);
        throw blocked;
      }
    }
    // tool.started is durable before the tool runs: a crash from here on
    // leaves an operation reckon lists and reconciles.
    await this.record([this.event(source, operationId, "started", "tool.started", { tool: name, args })]);
    let result: T;
    try {
      result = await run();
    } catch (err) {
      await this.reportEnd(this.failed(source, operationId, err));
      throw err;
    }
    await this.reportEnd(this.event(source, operationId, "completed", "tool.completed", { result_summary: summarize(result) }));
    return result;
  }

  private failed(source: string, operationId: string, err: unknown): Event {
    const c = classifyError(err);
    const override = this.options.classify?.(err);
    return this.event(source, operationId, "failed", "tool.failed", {
      error_type: c.errorType,
      error: errorText(err),
      effect: override ?? c.effect,
    });
  }

  /** Reports a call's end; the tool already ran, so a failure to report is passed to onReportError, not thrown. */
  private async reportEnd(ev: Event): Promise<void> {
    try {
      await this.record([ev]);
    } catch (err) {
      if (this.options.onReportError) this.options.onReportError(err);
      else console.warn(`reckon: could not report ${ev.type} of operation ${(ev.data as { operation_id: string }).operation_id}; it stays listed as in flight until reconciled:`, err);
    }
  }

  /** Journals a held or answered call: tool.started and tool.blocked naming the earlier operation, in one batch. */
  private async recordBlocked(source: string, name: string, args: unknown, operationId: string, answer: GuardAnswer): Promise<void> {
    const earlier = answer.operation ?? {};
    const reason = answer.decision === "hold"
      ? `held by the retry guard: ${earlierName(answer)} has the same tool and arguments and is unsettled`
      : `answered by the retry guard: ${earlierName(answer)} has the same tool and arguments and was settled occurred`;
    // The answers are not checked: a blocked record sent again carries
    // another ts, a conflict that changes nothing recorded.
    await this.client.ingest([
      this.event(source, operationId, "started", "tool.started", { tool: name, args, guard: answer.decision, held_by: earlier.operation_id }),
      this.event(source, operationId, "blocked", "tool.blocked", { reason }),
    ]);
  }

  /**
   * Wraps fn so that each call is guarded and reported as tool `name`. The
   * wrapper takes fn's arguments; the first one is recorded as the call's
   * args.
   */
  tool<A extends unknown[], R>(fn: (...args: A) => Promise<R> | R, opts: { name?: string } = {}): (...args: A) => Promise<R> {
    const name = opts.name ?? fn.name;
    if (!name) throw new Error("reckon: a tool needs a name (pass {name})");
    return (...args: A) => this.call(name, args.length <= 1 ? (args[0] ?? {}) : args, () => fn(...args));
  }
}

/**
 * Wraps fn as a reported, guarded tool of one run:
 * `const refund = tool(refundFn, {name: "payments.refund", project: "acme", runId: "ticket-981"})`.
 */
export function tool<A extends unknown[], R>(fn: (...args: A) => Promise<R> | R, opts: ReckonOptions & { name?: string }): (...args: A) => Promise<R> {
  return new Reckon(opts).tool(fn, { name: opts.name });
}
