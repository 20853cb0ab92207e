"""The ``@reckon.tool`` decorator: every call of a tool function asks the
retry guard, records tool.started before it runs, and tool.completed or
tool.failed (with an honest effect) after it."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import http.client
import inspect
import json
import socket
import sys
import urllib.error
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

from .client import Client, ReckonError

__all__ = ["tool", "Reckon", "NoEffect", "NotRun", "Held", "AlreadyDone", "classify_error"]


class NoEffect(Exception):
    """Raise it from a tool to say the call was refused before anything was sent.

    The operation is recorded settled with effect ``none``: repeating it is safe.
    """

    def __init__(self, message: str, error_type: str = "rejected_before_sending"):
        super().__init__(message)
        self.error_type = error_type


class NotRun(Exception):
    """A call the retry guard did not let run; its message is written for the model or the caller."""

    decision = ""

    def __init__(self, message: str, answer: Dict[str, Any], operation_id: str):
        super().__init__(message)
        self.earlier = answer.get("operation") or {}
        self.reconciliation = answer.get("reconciliation")
        self.operation_id = operation_id


class Held(NotRun):
    """The guard held the call: an identical call is unsettled; repeating it now could repeat its effect."""

    decision = "hold"


class AlreadyDone(NotRun):
    """The guard answered the call: an identical call was settled occurred, so its effect already happened."""

    decision = "done"


def _earlier(answer: Dict[str, Any]) -> str:
    op = answer.get("operation") or {}
    name = f"operation {op.get('operation_id', '?')}"
    return f"{name} of run {op['run_id']}" if op.get("run_id") else name


def _held_message(answer: Dict[str, Any]) -> str:
    return (f"Not run: an identical earlier call ({_earlier(answer)}) may already have had this effect, "
            "and reckon is reconciling it. Do not retry this call now; wait for its verdict or ask an operator.")


def _done_message(answer: Dict[str, Any]) -> str:
    r = answer.get("reconciliation") or {}
    d = r.get("data") if isinstance(r.get("data"), dict) else r
    who = ", ".join(x for x in (f"basis {d['basis']}" if d.get("basis") else "",
                                f"decided by {r['actor']}" if r.get("actor") else "") if x)
    note = f": {d['note']}" if d.get("note") else ""
    return (f"Not run: this effect already happened. An identical earlier call ({_earlier(answer)}) was settled "
            f"\"occurred\"{f' ({who})' if who else ''}{note}. Do not repeat it.")


_DROPPED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, http.client.RemoteDisconnected,
            http.client.IncompleteRead)


def classify_error(err: BaseException) -> Tuple[str, str]:
    """The (effect, error_type) of a tool's exception.

    Only a failure that shows nothing was sent is ``none``: NoEffect, a
    refused connection, a name that does not resolve. A timeout, a dropped
    connection and anything unknown are ``uncertain``: the call may have
    landed.
    """
    if isinstance(err, NoEffect):
        return "none", err.error_type
    marked = getattr(err, "reckon_effect", None)
    if marked in ("none", "uncertain", "occurred"):
        return marked, getattr(err, "error_type", "tool_error")
    e: Optional[BaseException] = err
    for _ in range(5):
        if e is None:
            break
        if isinstance(e, urllib.error.HTTPError):
            break  # the server answered: what it did is its own business
        if isinstance(e, urllib.error.URLError) and isinstance(e.reason, BaseException):
            e = e.reason
            continue
        if isinstance(e, ConnectionRefusedError):
            return "none", "connection_refused"
        if isinstance(e, socket.gaierror):
            return "none", "not_reached"
        if isinstance(e, (TimeoutError, socket.timeout, asyncio.TimeoutError)):
            return "uncertain", "timeout"
        if isinstance(e, _DROPPED):
            return "uncertain", "connection_lost"
        e = e.__cause__ or e.__context__
    return "uncertain", type(err).__name__


def _jsonable(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return repr(v)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def _summary(result: Any) -> str:
    try:
        s = result if isinstance(result, str) else json.dumps(result, default=repr)
    except (TypeError, ValueError):
        s = repr(result)
    return s if len(s) <= 500 else s[:497] + "..."


class Reckon:
    """Reports and guards the tool calls of one run of one project.

    ``guard=False`` reports without asking the retry guard; ``scope`` is
    where the guard looks for identical calls ("project", the server's
    default, or "run"); ``classify(err)`` may answer an effect for errors
    the defaults cannot classify; ``source`` defaults to the token's name.
    """

    def __init__(self, project: str, run_id: str, client: Optional[Client] = None, *, guard: bool = True,
                 scope: Optional[str] = None, classify: Optional[Callable[[BaseException], Optional[str]]] = None,
                 source: Optional[str] = None, on_report_error: Optional[Callable[[BaseException], None]] = None):
        if not project:
            raise ValueError("reckon: project is required")
        if not run_id:
            raise ValueError("reckon: run_id is required")
        self.project, self.run_id = project, run_id
        self.client = client or Client()
        self.guard, self.scope, self.classify = guard, scope, classify
        self._source = source
        self.on_report_error = on_report_error

    def source(self) -> str:
        if self._source is None:
            self._source = self.client.whoami()["name"]
        return self._source

    def _event_id(self, operation_id: str, what: str) -> str:
        eid = f"{self.project}/{self.run_id}/{operation_id}/{what}"
        if len(eid.encode()) <= 512:
            return eid
        return f"sha256:{hashlib.sha256(eid.encode()).hexdigest()}/{what}"

    def _event(self, operation_id: str, what: str, type_: str, data: Dict[str, Any]) -> Dict[str, Any]:
        return {"source_id": self.source(), "event_id": self._event_id(operation_id, what), "project": self.project,
                "run_id": self.run_id, "type": type_, "ts": _now(), "actor": "agent",
                "data": {"operation_id": operation_id, **data}}

    def _record(self, events: List[Dict[str, Any]]) -> None:
        for r in self.client.ingest(events):
            if r["status"] == "conflict":
                raise ReckonError(409, f"event {r['source_id']}/{r['event_id']} conflicts with one already recorded: "
                                       f"{r.get('reason', 'other content under the same key')}")

    def report_run(self, type_: str, **data: Any) -> None:
        """Records run.started, run.completed or run.failed (with error=...) for this run."""
        ev = self._event("run", type_.split(".", 1)[1], type_, data)
        del ev["data"]["operation_id"]
        self._record([ev])

    def _ask_guard(self, name: str, args: Any) -> Dict[str, Any]:
        try:
            return self.client.guard(self.project, name, args, run_id=self.run_id, scope=self.scope)
        except ReckonError as e:
            if e.status == 404:
                raise RuntimeError(f"reckon: {self.client.url} has no retry guard (POST /v1/agent/operations/guard "
                                   "answered 404); upgrade reckon, or pass guard=False to report calls without "
                                   "asking") from e
            raise

    def before(self, name: str, args: Any, call_id: Optional[str] = None) -> str:
        """Asks the guard and records tool.started; answers the operation id. Raises Held or AlreadyDone."""
        operation_id = call_id or str(uuid.uuid4())
        if self.guard:
            answer = self._ask_guard(name, args)
            decision = answer.get("decision")
            if decision in ("hold", "done"):
                # A framework replaying a call replays its call id: the
                # earlier operation may be this very id, and a tool.blocked
                # under it would settle it. The blocked call gets its own id.
                earlier = answer.get("operation") or {}
                if earlier.get("operation_id") == operation_id and earlier.get("run_id") == self.run_id:
                    operation_id = f"{operation_id}/retry-{uuid.uuid4()}"
                self._record_blocked(name, args, operation_id, answer)
                if decision == "hold":
                    raise Held(_held_message(answer), answer, operation_id)
                raise AlreadyDone(_done_message(answer), answer, operation_id)
        # Durable before the tool runs: a crash from here on leaves an
        # operation reckon lists and reconciles.
        self._record([self._event(operation_id, "started", "tool.started", {"tool": name, "args": args})])
        return operation_id

    def succeeded(self, operation_id: str, result: Any) -> None:
        """Records tool.completed; a failure to report is passed to on_report_error (the tool already ran)."""
        self._report_end(self._event(operation_id, "completed", "tool.completed", {"result_summary": _summary(result)}))

    def failed(self, operation_id: str, err: BaseException) -> None:
        """Records tool.failed with the error's effect."""
        effect, error_type = classify_error(err)
        if self.classify is not None:
            effect = self.classify(err) or effect
        text = (str(err) or type(err).__name__)[:2000]
        self._report_end(self._event(operation_id, "failed", "tool.failed",
                                     {"error_type": error_type, "error": text, "effect": effect}))

    def _report_end(self, ev: Dict[str, Any]) -> None:
        try:
            self._record([ev])
        except Exception as e:  # noqa: BLE001 - the tool ran; its result still goes back
            if self.on_report_error is not None:
                self.on_report_error(e)
            else:
                print(f"reckon: could not report {ev['type']} of operation {ev['data']['operation_id']}; it stays "
                      f"listed as in flight until reconciled: {e}", file=sys.stderr)

    def _record_blocked(self, name: str, args: Any, operation_id: str, answer: Dict[str, Any]) -> None:
        earlier = answer.get("operation") or {}
        verb = "held" if answer["decision"] == "hold" else "answered"
        state = "is unsettled" if answer["decision"] == "hold" else "was settled occurred"
        reason = f"{verb} by the retry guard: {_earlier(answer)} has the same tool and arguments and {state}"
        # A replayed call id finds its blocked record already there (a
        # conflict on ts only): that is fine, so results are not checked.
        self.client.ingest([
            self._event(operation_id, "started", "tool.started",
                        {"tool": name, "args": args, "guard": answer["decision"],
                         "held_by": earlier.get("operation_id")}),
            self._event(operation_id, "blocked", "tool.blocked", {"reason": reason}),
        ])

    def call(self, name: str, args: Any, fn: Callable[[], Any], call_id: Optional[str] = None) -> Any:
        """Runs one call of tool ``name``: guard, tool.started, fn(), then tool.completed or tool.failed."""
        operation_id = self.before(name, args, call_id)
        try:
            result = fn()
        except BaseException as e:
            self.failed(operation_id, e)
            raise
        self.succeeded(operation_id, result)
        return result

    def wrap(self, fn: Callable[..., Any], name: Optional[str] = None) -> Callable[..., Any]:
        """Wraps fn (a plain or an async function) as tool ``name`` (default fn's name)."""
        tool_name = name or fn.__name__
        sig = inspect.signature(fn)

        def bound_args(args: tuple, kwargs: dict) -> Dict[str, Any]:
            try:
                b = sig.bind(*args, **kwargs)
            except TypeError as e:
                # Refused before anything ran: record it settled as none.
                op = str(uuid.uuid4())
                self._record([self._event(op, "started", "tool.started", {"tool": tool_name, "args": {}})])
                self.failed(op, NoEffect(str(e), "argument_validation"))
                raise
            b.apply_defaults()
            return {k: _jsonable(v) for k, v in b.arguments.items()}

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, reckon_call_id: Optional[str] = None, **kwargs: Any) -> Any:
                call_args = await asyncio.to_thread(bound_args, args, kwargs)
                op = await asyncio.to_thread(self.before, tool_name, call_args, reckon_call_id)
                try:
                    result = await fn(*args, **kwargs)
                except BaseException as e:
                    await asyncio.to_thread(self.failed, op, e)
                    raise
                await asyncio.to_thread(self.succeeded, op, result)
                return result
            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, reckon_call_id: Optional[str] = None, **kwargs: Any) -> Any:
            return self.call(tool_name, bound_args(args, kwargs), lambda: fn(*args, **kwargs), call_id=reckon_call_id)
        return wrapper


def tool(fn: Optional[Callable[..., Any]] = None, *, project: Optional[str] = None, run_id: Optional[str] = None,
         client: Optional[Client] = None, name: Optional[str] = None, **options: Any) -> Any:
    """Decorates a tool function so each call is guarded and reported::

        @reckon.tool(project="acme", run_id="ticket-981")
        def refund(order: str, amount_cents: int) -> str: ...

    The call's arguments (by parameter name) are its args; a framework's
    call id may be passed as ``reckon_call_id=``. A held call raises Held,
    one whose effect already happened AlreadyDone; the tool's own
    exception is re-raised after tool.failed is recorded.
    """
    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        if not project or not run_id:
            raise ValueError("reckon.tool: project= and run_id= are required")
        return Reckon(project, run_id, client, **options).wrap(f, name)
    return decorate(fn) if fn is not None else decorate
