"""The HTTP client of reckon's API, standard library only.

Every write it retries sends the same bytes again, so a retried ingest is
answered ``repeated``, never stored twice.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional

__all__ = ["Client", "ReckonError", "settlement_in", "watched_operation"]

_RETRYABLE = {408, 429, 500, 502, 503, 504}
_MAX_BATCH = 1000  # the most events POST /v1/events takes in one request


class ReckonError(Exception):
    """An error answer of the API: its status, message and, for an event of a batch, the event's index."""

    def __init__(self, status: int, message: str, event_index: Optional[int] = None):
        super().__init__(f"reckon: {status}: {message}")
        self.status = status
        self.message = message
        self.event_index = event_index


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v or None


class Client:
    """A client of reckon's HTTP API.

    ``url`` defaults to RECKON_URL (else http://127.0.0.1:8080), ``token`` to
    RECKON_TOKEN. A request that fails in transit or is answered 408, 429 or
    5xx is retried ``attempts`` times with the same body.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 attempts: int = 5, backoff: float = 0.2, timeout: float = 30.0):
        self.url = (url or _env("RECKON_URL") or "http://127.0.0.1:8080").rstrip("/")
        self.token = token if token is not None else _env("RECKON_TOKEN")
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.timeout = timeout
        self._whoami: Optional[Dict[str, str]] = None

    # -- plumbing ---------------------------------------------------------

    def _headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(extra or {})
        return h

    def request(self, method: str, path: str, *, query: Optional[Dict[str, Any]] = None,
                body: Any = None, headers: Optional[Dict[str, str]] = None) -> Any:
        """Sends one request and answers its JSON, retrying transit failures and 408/429/5xx."""
        url = self.url + path + _query(query)
        data = None
        hdrs = self._headers(headers)
        if body is not None:
            # Serialized once: every attempt sends the same bytes.
            data = json.dumps(body, separators=(",", ":")).encode()
            hdrs["Content-Type"] = "application/json"
        last: Optional[BaseException] = None
        for attempt in range(1, self.attempts + 1):
            req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as res:
                    text = res.read().decode()
                    return json.loads(text) if text else None
            except urllib.error.HTTPError as e:
                err = _error_of(e)
                if e.code not in _RETRYABLE or attempt == self.attempts:
                    raise err from None
                last = err
                retry_after = e.headers.get("Retry-After") if e.headers else None
                pause = float(retry_after) if retry_after and retry_after.isdigit() else self.backoff * 2 ** (attempt - 1)
                time.sleep(min(pause, 30.0))
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                last = e
                if attempt < self.attempts:
                    time.sleep(self.backoff * 2 ** (attempt - 1))
        assert last is not None
        raise last

    # -- the API ------------------------------------------------------------

    def whoami(self) -> Dict[str, str]:
        """The caller's token: its name (the source it writes events under) and role."""
        if self._whoami is None:
            self._whoami = self.request("GET", "/v1/whoami")
        return self._whoami

    def ingest(self, events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Ingests events, each answered accepted, repeated or conflict.

        Sent in batches of at most 1,000 (the API's limit per request); a
        batch is retried with the same bytes, so a retry after a lost answer
        is answered repeated.
        """
        results: List[Dict[str, Any]] = []
        for i in range(0, len(events), _MAX_BATCH):
            results.extend(self.request("POST", "/v1/events", body={"events": events[i:i + _MAX_BATCH]})["results"])
        return results

    def start_run(self, project: str, plan: Dict[str, Any], run_id: Optional[str] = None) -> Dict[str, str]:
        """Starts a kernel run from a plan (operator)."""
        body: Dict[str, Any] = {"project": project, "plan": plan}
        if run_id is not None:
            body["run_id"] = run_id
        return self.request("POST", "/v1/runs", body=body)

    def get_run(self, run_id: str, project: str, cursor: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """A run and one page of its events."""
        return self.request("GET", "/v1/runs/" + urllib.parse.quote(run_id, safe=""),
                            query={"project": project, "cursor": cursor, "limit": limit})

    def list_operations(self, project: str, run_id: Optional[str] = None, cursor: Optional[str] = None,
                        limit: Optional[int] = None) -> Dict[str, Any]:
        """One page of the unsettled operations of a project (or one run)."""
        return self.request("GET", "/v1/agent/operations",
                            query={"project": project, "run_id": run_id, "cursor": cursor, "limit": limit})

    def all_operations(self, project: str, run_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every unsettled operation of a project (or one run), following the pages."""
        out: List[Dict[str, Any]] = []
        cursor = None
        while True:
            page = self.list_operations(project, run_id=run_id, cursor=cursor)
            out.extend(page["operations"])
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def history(self, project: str, run_id: str, operation_id: str) -> List[Dict[str, Any]]:
        """The events of one operation, its reconciliations included, in order."""
        return self.request("GET", "/v1/agent/operations/history",
                            query={"project": project, "run_id": run_id, "operation_id": operation_id})["events"]

    def attention(self, project: str, run_id: Optional[str] = None, cursor: Optional[str] = None,
                  limit: Optional[int] = None) -> Dict[str, Any]:
        """One page of the operator's queue."""
        return self.request("GET", "/v1/agent/operations/attention",
                            query={"project": project, "run_id": run_id, "cursor": cursor, "limit": limit})

    def reconcile(self, project: str, run_id: str, operation_id: str, effect: str, note: str,
                  evidence: Any = None, idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """Records an operator's ruling (operator): effect none, occurred or unknown; answers the operation.reconciled event."""
        body: Dict[str, Any] = {"project": project, "run_id": run_id, "operation_id": operation_id,
                                "effect": effect, "note": note}
        if evidence is not None:
            body["evidence"] = evidence
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self.request("POST", "/v1/agent/operations/reconcile", body=body, headers=headers)

    def verdicts(self, project: str, run_id: Optional[str] = None, since: Optional[str] = None,
                 limit: Optional[int] = None) -> Dict[str, Any]:
        """The supervisor's verdicts, newest first, with their resolutions."""
        return self.request("GET", "/v1/supervisor/verdicts",
                            query={"project": project, "run_id": run_id, "since": since, "limit": limit})

    def projects(self) -> Dict[str, Any]:
        """The projects the journal knows."""
        return self.request("GET", "/v1/projects")

    def guard(self, project: str, tool: str, args: Any, run_id: Optional[str] = None,
              scope: Optional[str] = None) -> Dict[str, Any]:
        """Asks the retry guard whether a call may run.

        Answers {"decision": "proceed"}, {"decision": "hold", "operation"}
        while an identical call (same project, tool and arguments) is
        unsettled, or {"decision": "done", "operation", "reconciliation"}
        when one was settled occurred. A server without the guard answers
        404 (a ReckonError).
        """
        body: Dict[str, Any] = {"project": project, "tool": tool, "args": {} if args is None else args}
        if run_id is not None:
            body["run_id"] = run_id
        if scope is not None:
            body["scope"] = scope
        return self.request("POST", "/v1/agent/operations/guard", body=body)

    def watch(self, project: str, run_id: Optional[str] = None, last_event_id: Optional[str] = None,
              timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """The verdict stream: settlements and attention changes as they happen.

        Yields {"id", "event", "data"} (data parsed as JSON when it is): first
        "ready" ({project, run_id, cursor}), then events named by their
        journal type (operation.reconciled, supervisor.verdict, tool.failed,
        run.awaiting, run.resumed) with data {cursor, seq, attention, event}. A
        dropped connection is resumed with Last-Event-ID, so nothing is lost
        or seen twice. ``timeout`` bounds each read (socket.timeout when the
        stream is silent that long).
        """
        failures = 0
        while True:
            headers = self._headers({"Accept": "text/event-stream"})
            if last_event_id is not None:
                headers["Last-Event-ID"] = last_event_id
            url = self.url + "/v1/agent/operations/watch" + _query({"project": project, "run_id": run_id})
            try:
                res = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                             timeout=timeout if timeout is not None else self.timeout)
            except urllib.error.HTTPError as e:
                err = _error_of(e)
                failures += 1
                if e.code not in _RETRYABLE or failures >= self.attempts:
                    raise err from None
                time.sleep(self.backoff * 2 ** (failures - 1))
                continue
            except (urllib.error.URLError, ConnectionError) as e:
                failures += 1
                if failures >= self.attempts:
                    raise
                time.sleep(self.backoff * 2 ** (failures - 1))
                continue
            try:
                for ev in parse_sse(res):
                    failures = 0
                    if ev.get("id") is not None:
                        last_event_id = ev["id"]
                    if ev["event"]:
                        yield ev
            except (ConnectionError, http.client.HTTPException):
                failures += 1
                if failures >= self.attempts:
                    raise
            finally:
                res.close()

    def wait_for_settlement(self, project: str, run_id: str, operation_id: str,
                            timeout: Optional[float] = None) -> Dict[str, Any]:
        """Waits on the verdict stream until the operation is settled; answers the settling event's data.

        Reads the history once the stream is open (its first event, ready,
        has come), so neither a verdict recorded before the call nor one
        landing in between is missed.
        """
        stream = self.watch(project, run_id=run_id, timeout=timeout)
        try:
            first = next(stream)
            settled = settlement_in(self.history(project, run_id, operation_id), operation_id)
            if settled is not None:
                return settled
            for ev in itertools.chain([first], stream):
                if watched_operation(ev) != operation_id:
                    continue
                settled = settlement_in(self.history(project, run_id, operation_id), operation_id)
                if settled is not None:
                    return settled
        finally:
            stream.close()
        raise ReckonError(0, "the verdict stream ended")


def watched_operation(ev: Dict[str, Any]) -> Optional[str]:
    """The operation a verdict stream event is about: its journal event's data.operation_id."""
    data = ev.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("event"), dict):
        return None
    op = (data["event"].get("data") or {}).get("operation_id")
    return op if isinstance(op, str) else None


def settlement_in(events: List[Dict[str, Any]], operation_id: str) -> Optional[Dict[str, Any]]:
    """The data of the event that settles an operation, from its history; None while it is unsettled."""
    settled = None
    for ev in events:
        d = ev.get("data") or {}
        if d.get("operation_id") != operation_id:
            continue
        t = ev.get("type")
        if t == "operation.reconciled" and d.get("effect") in ("none", "occurred"):
            settled = d
        elif t in ("tool.completed", "tool.blocked"):
            settled = d
        elif t == "tool.failed" and d.get("effect") in ("none", "occurred"):
            settled = d
    return settled


def parse_sse(stream) -> Iterator[Dict[str, Any]]:
    """Parses a text/event-stream (id, event and data lines; a blank line ends an event)."""
    ev_id: Optional[str] = None
    event = ""
    data: List[str] = []
    saw = False
    for raw in stream:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if saw:
                text = "\n".join(data)
                try:
                    parsed: Any = json.loads(text)
                except ValueError:
                    parsed = text
                yield {"id": ev_id, "event": event or ("message" if data else ""), "data": parsed}
            event, data, saw = "", [], False
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        saw = True
        if field == "id":
            ev_id = value
        elif field == "event":
            event = value
        elif field == "data":
            data.append(value)


def _query(q: Optional[Dict[str, Any]]) -> str:
    if not q:
        return ""
    pairs = [(k, str(v)) for k, v in q.items() if v is not None]
    return "?" + urllib.parse.urlencode(pairs) if pairs else ""


def _error_of(e: urllib.error.HTTPError) -> ReckonError:
    try:
        text = e.read().decode()
    except (OSError, socket.timeout):
        text = ""
    try:
        j = json.loads(text)
        if isinstance(j, dict) and isinstance(j.get("error"), str):
            return ReckonError(e.code, j["error"], j.get("event_index"))
    except ValueError:
        pass
    return ReckonError(e.code, text.strip() or e.reason or f"HTTP {e.code}")
