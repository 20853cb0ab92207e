"""What the tests need from scripts/test-clients.sh: a real `reckon dev`
(RECKON_URL) and an agent and an operator token."""

import os
import time
import uuid

import reckon


def _need(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        raise RuntimeError(f"{name} is not set: run these tests through scripts/test-clients.sh "
                           "(make test-clients), which starts reckon dev")
    return v


URL = _need("RECKON_URL")
AGENT = reckon.Client(URL, token=_need("RECKON_TEST_AGENT_TOKEN"))
OPERATOR = reckon.Client(URL, token=_need("RECKON_TEST_OPERATOR_TOKEN"))


def project(prefix: str) -> str:
    """A project of its own, so tests never see each other's operations."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def eventually(check, limit: float = 10.0):
    """Retries check until it passes or limit seconds end: a ruling reaches
    the listing through reckon's outbox, a moment after the API answered."""
    end = time.monotonic() + limit
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


_routes_checked = False


def need_guard_routes() -> None:
    """Fails, naming the route, when the server lacks the retry guard or the
    verdict stream: the tests of guard_tests need both."""
    global _routes_checked
    if _routes_checked:
        return
    missing = []
    try:
        OPERATOR.guard("route-check", "t", {})
    except reckon.ReckonError as e:
        if e.status == 404:
            missing.append("POST /v1/agent/operations/guard")
    try:
        next(iter(OPERATOR.watch("route-check", timeout=5)))
    except reckon.ReckonError as e:
        if e.status == 404:
            missing.append("GET /v1/agent/operations/watch")
    if missing:
        raise AssertionError(f"this reckon has no {' and no '.join(missing)} (404): the retry guard and verdict "
                             "stream tests need them on the server under test")
    _routes_checked = True
