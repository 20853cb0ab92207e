/** An error answer of the API: its status, message and, for an event of a batch, the event's index. */
export class ReckonError extends Error {
    /** The HTTP status. */
    status;
    /** The refused event's index in the batch, when the answer names one. */
    eventIndex;
    constructor(status, message, eventIndex) {
        super(`reckon: ${status}: ${message}`);
        this.name = "ReckonError";
        this.status = status;
        this.eventIndex = eventIndex;
    }
}
const retryable = new Set([408, 429, 500, 502, 503, 504]);
/** The most events POST /v1/events takes in one request. */
const maxBatch = 1000;
function env(name) {
    const v = globalThis.process?.env?.[name];
    return v === "" ? undefined : v;
}
function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted)
            return reject(signal.reason);
        const t = setTimeout(resolve, ms);
        signal?.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
    });
}
/**
 * A client of reckon's HTTP API. Every write it retries sends the same
 * bytes again, so a retried ingest is answered `repeated`, never stored twice.
 */
export class Client {
    /** The API's base URL, without a trailing slash. */
    url;
    token;
    fetchImpl;
    attempts;
    backoffMs;
    timeoutMs;
    whoamiPromise;
    constructor(opts = {}) {
        this.url = (opts.url ?? env("RECKON_URL") ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
        this.token = opts.token ?? env("RECKON_TOKEN");
        this.fetchImpl = opts.fetch ?? globalThis.fetch.bind(globalThis);
        this.attempts = Math.max(1, opts.attempts ?? 5);
        this.backoffMs = opts.backoffMs ?? 200;
        this.timeoutMs = opts.timeoutMs ?? 30_000;
    }
    /** Sends one request, retrying transit failures and 408/429/5xx with the same body. */
    async request(method, path, opts = {}) {
        const res = await this.send(method, path, opts);
        const text = await res.text();
        return (text ? JSON.parse(text) : undefined);
    }
    async send(method, path, opts) {
        const url = this.url + path + queryString(opts.query);
        const headers = { Accept: "application/json", ...opts.headers };
        if (this.token)
            headers.Authorization = `Bearer ${this.token}`;
        // The body is serialized once: every attempt sends the same bytes.
        let body;
        if (opts.body !== undefined) {
            body = JSON.stringify(opts.body);
            headers["Content-Type"] = "application/json";
        }
        let lastError;
        for (let attempt = 1; attempt <= this.attempts; attempt++) {
            let res;
            try {
                res = await this.fetchImpl(url, { method, headers, body, signal: AbortSignal.timeout(this.timeoutMs) });
            }
            catch (err) {
                lastError = err;
                if (attempt < this.attempts)
                    await sleep(this.backoffMs * 2 ** (attempt - 1));
                continue;
            }
            if (res.ok)
                return res;
            const err = await errorOf(res);
            if (!retryable.has(res.status) || attempt === this.attempts)
                throw err;
            lastError = err;
            const after = Number(res.headers.get("Retry-After"));
            await sleep(after > 0 ? Math.min(after * 1000, 30_000) : this.backoffMs * 2 ** (attempt - 1));
        }
        throw lastError;
    }
    /** The caller's token: its name (the source it writes events under) and role. */
    whoami() {
        this.whoamiPromise ??= this.request("GET", "/v1/whoami").catch((err) => {
            this.whoamiPromise = undefined;
            throw err;
        });
        return this.whoamiPromise;
    }
    /**
     * Ingests events, each answered accepted, repeated or conflict, in
     * batches of at most 1,000 (the API's limit per request). A batch is
     * retried with the same bytes, so a retry after a lost answer is
     * answered repeated.
     */
    async ingest(events) {
        const results = [];
        for (let i = 0; i < events.length; i += maxBatch) {
            const res = await this.request("POST", "/v1/events", { body: { events: events.slice(i, i + maxBatch) } });
            results.push(...res.results);
        }
        return results;
    }
    /** Starts a kernel run from a plan (operator). */
    startRun(req) {
        return this.request("POST", "/v1/runs", { body: { project: req.project, run_id: req.runId, plan: req.plan } });
    }
    /** A run and one page of its events. */
    getRun(runId, q) {
        return this.request("GET", `/v1/runs/${encodeURIComponent(runId)}`, { query: q });
    }
    /** One page of the unsettled operations of a project (or one run). */
    listOperations(q) {
        return this.request("GET", "/v1/agent/operations", { query: { project: q.project, run_id: q.runId, cursor: q.cursor, limit: q.limit } });
    }
    /** Every unsettled operation of a project (or one run), following the pages. */
    async allOperations(q) {
        const out = [];
        let cursor;
        do {
            const page = await this.listOperations({ ...q, cursor });
            out.push(...page.operations);
            cursor = page.next_cursor ?? undefined;
        } while (cursor);
        return out;
    }
    /** The events of one operation, its reconciliations included, in order. */
    async history(q) {
        const res = await this.request("GET", "/v1/agent/operations/history", {
            query: { project: q.project, run_id: q.runId, operation_id: q.operationId },
        });
        return res.events;
    }
    /** One page of the operator's queue. */
    attention(q) {
        return this.request("GET", "/v1/agent/operations/attention", { query: { project: q.project, run_id: q.runId, cursor: q.cursor, limit: q.limit } });
    }
    /** Records an operator's ruling on an operation (operator); the answer is the operation.reconciled event. */
    reconcile(req, opts = {}) {
        const body = { project: req.project, run_id: req.runId, operation_id: req.operationId, effect: req.effect, note: req.note };
        if (req.evidence !== undefined)
            body.evidence = req.evidence;
        return this.request("POST", "/v1/agent/operations/reconcile", {
            body,
            headers: opts.idempotencyKey ? { "Idempotency-Key": opts.idempotencyKey } : undefined,
        });
    }
    /** The supervisor's verdicts, newest first, with their resolutions. */
    verdicts(q) {
        return this.request("GET", "/v1/supervisor/verdicts", { query: { project: q.project, run_id: q.runId, since: q.since, limit: q.limit } });
    }
    /** The projects the journal knows. */
    projects() {
        return this.request("GET", "/v1/projects");
    }
    /**
     * Asks the retry guard whether a call may run: proceed, hold (an
     * identical call is unsettled) or done (an identical call was settled
     * occurred). A server without the guard answers 404, a ReckonError.
     */
    guard(req) {
        const body = { project: req.project, tool: req.tool, args: req.args ?? {} };
        if (req.runId !== undefined)
            body.run_id = req.runId;
        if (req.scope !== undefined)
            body.scope = req.scope;
        return this.request("POST", "/v1/agent/operations/guard", { body });
    }
    /**
     * The verdict stream: settlements and attention changes of a project (or
     * one run) as they happen. A dropped connection is resumed with
     * Last-Event-ID, so no event is lost or seen twice; the iteration ends
     * when signal aborts.
     */
    async *watch(q) {
        let lastId = q.lastEventId;
        let failures = 0;
        while (!q.signal?.aborted) {
            const headers = { Accept: "text/event-stream" };
            if (this.token)
                headers.Authorization = `Bearer ${this.token}`;
            if (lastId !== undefined)
                headers["Last-Event-ID"] = lastId;
            let res;
            try {
                res = await this.fetchImpl(this.url + "/v1/agent/operations/watch" + queryString({ project: q.project, run_id: q.runId }), { headers, signal: q.signal });
            }
            catch (err) {
                if (q.signal?.aborted)
                    return;
                if (++failures >= this.attempts)
                    throw err;
                await sleep(this.backoffMs * 2 ** (failures - 1), q.signal).catch(() => undefined);
                continue;
            }
            if (!res.ok) {
                const err = await errorOf(res);
                if (!retryable.has(res.status) || ++failures >= this.attempts)
                    throw err;
                await sleep(this.backoffMs * 2 ** (failures - 1), q.signal).catch(() => undefined);
                continue;
            }
            try {
                for await (const ev of parseSSE(res.body)) {
                    failures = 0;
                    if (ev.id !== undefined)
                        lastId = ev.id;
                    if (ev.event === "")
                        continue; // a comment or keep-alive
                    yield ev;
                }
            }
            catch (err) {
                if (q.signal?.aborted)
                    return;
                if (++failures >= this.attempts)
                    throw err;
            }
        }
    }
    /**
     * Waits on the verdict stream until the operation is settled, and answers
     * the settling event's data. Reads the history once first, so a verdict
     * recorded before the call is not waited for.
     */
    async waitForSettlement(q) {
        const ctl = new AbortController();
        const onAbort = () => ctl.abort(q.signal?.reason);
        q.signal?.addEventListener("abort", onAbort, { once: true });
        try {
            const stream = this.watch({ project: q.project, runId: q.runId, signal: ctl.signal });
            // The stream is open (its first event, ready, has come) before the
            // history is read, so a verdict landing in between is on the stream.
            const first = await stream.next();
            const settled = settlementIn(await this.history(q), q.operationId);
            if (settled)
                return settled;
            for (let it = first; !it.done; it = await stream.next()) {
                if (watchedOperation(it.value) !== q.operationId)
                    continue;
                const again = settlementIn(await this.history(q), q.operationId);
                if (again)
                    return again;
            }
            throw q.signal?.reason ?? new Error("reckon: the verdict stream ended");
        }
        finally {
            q.signal?.removeEventListener("abort", onAbort);
            ctl.abort();
        }
    }
}
/** The operation a verdict stream event is about: its journal event's data.operation_id. */
export function watchedOperation(ev) {
    const data = ev.data;
    const id = data && typeof data === "object" ? data.event?.data?.operation_id : undefined;
    return typeof id === "string" ? id : undefined;
}
/** The data of the event that settles an operation, from its history; undefined while it is unsettled. */
export function settlementIn(events, operationId) {
    let settled;
    for (const ev of events) {
        const d = ev.data;
        if (d?.operation_id !== operationId)
            continue;
        switch (ev.type) {
            case "operation.reconciled":
                settled = d.effect === "none" || d.effect === "occurred" ? d : settled;
                break;
            case "tool.completed":
            case "tool.blocked":
                settled = d;
                break;
            case "tool.failed":
                if (d.effect === "none" || d.effect === "occurred")
                    settled = d;
                break;
        }
    }
    return settled;
}
function queryString(q) {
    if (!q)
        return "";
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(q))
        if (v !== undefined && v !== null)
            p.set(k, String(v));
    const s = p.toString();
    return s ? "?" + s : "";
}
async function errorOf(res) {
    const text = await res.text().catch(() => "");
    try {
        const j = JSON.parse(text);
        if (typeof j.error === "string")
            return new ReckonError(res.status, j.error, j.event_index);
    }
    catch {
        // not JSON: the status text says it
    }
    return new ReckonError(res.status, text.trim() || res.statusText || `HTTP ${res.status}`);
}
/** Parses a text/event-stream body into events (the WHATWG rules: id, event, data lines; a blank line ends an event). */
export async function* parseSSE(body) {
    const decoder = new TextDecoder();
    let buf = "";
    let id;
    let event = "";
    let data = [];
    let sawField = false;
    for await (const chunk of body) {
        buf += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
            if (line === "") {
                if (sawField) {
                    const raw = data.join("\n");
                    let parsed = raw;
                    try {
                        parsed = JSON.parse(raw);
                    }
                    catch { /* plain text data */ }
                    yield { id, event: event || (data.length ? "message" : ""), data: parsed };
                }
                event = "";
                data = [];
                sawField = false;
                continue;
            }
            if (line.startsWith(":"))
                continue;
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            let value = colon < 0 ? "" : line.slice(colon + 1);
            if (value.startsWith(" "))
                value = value.slice(1);
            sawField = true;
            if (field === "id")
                id = value;
            else if (field === "event")
                event = value;
            else if (field === "data")
                data.push(value);
        }
    }
}
