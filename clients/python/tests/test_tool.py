"""The @reckon.tool decorator against a real reckon dev, without the retry
guard: what each outcome of a call leaves in the journal."""

import asyncio
import socket
import unittest
import urllib.request

import reckon
from tests.env import AGENT, OPERATOR, URL, project


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def events(p, run="r1"):
    return OPERATOR.get_run(run, p, limit=1000)["events"]


class ToolTest(unittest.TestCase):
    def test_success_is_started_then_completed(self):
        p = project("ok")

        @reckon.tool(project=p, run_id="r1", client=AGENT, guard=False)
        def refund(order: str, amount_cents: int = 100) -> str:
            return f"refund R-1 for {order}"

        self.assertEqual(refund("5521"), "refund R-1 for 5521")
        evs = events(p)
        self.assertEqual([e["type"] for e in evs], ["tool.started", "tool.completed"])
        self.assertEqual(evs[0]["data"]["tool"], "refund")
        self.assertEqual(evs[0]["data"]["args"], {"order": "5521", "amount_cents": 100})
        self.assertEqual(evs[1]["data"]["result_summary"], "refund R-1 for 5521")
        self.assertEqual(OPERATOR.all_operations(p), [])

    def test_dropped_connection_after_effect_is_uncertain(self):
        p = project("dropped")
        effects = []

        @reckon.tool(project=p, run_id="r1", client=AGENT, guard=False, name="payments.refund")
        def refund(order):
            effects.append(order)
            raise ConnectionResetError("connection reset by peer")

        with self.assertRaises(ConnectionResetError):
            refund("5521")
        ops = OPERATOR.all_operations(p)
        self.assertEqual(len(ops), 1)
        self.assertEqual(ops[0]["state"], "failed_uncertain")
        self.assertEqual(ops[0]["tool"], "payments.refund")
        self.assertEqual((ops[0]["failure"]["effect"], ops[0]["failure"]["error_type"]), ("uncertain", "connection_lost"))
        self.assertEqual(effects, ["5521"])

    def test_timeout_is_uncertain(self):
        p = project("timeout")
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)  # accepts, never answers
        try:
            @reckon.tool(project=p, run_id="r1", client=AGENT, guard=False)
            def slow_post():
                urllib.request.urlopen(f"http://127.0.0.1:{srv.getsockname()[1]}/", data=b"x", timeout=0.2)

            with self.assertRaises(Exception):
                slow_post()
        finally:
            srv.close()
        failure = OPERATOR.all_operations(p)[0]["failure"]
        self.assertEqual((failure["effect"], failure["error_type"]), ("uncertain", "timeout"))

    def test_refused_connection_and_no_effect_are_none(self):
        p = project("none")
        port = closed_port()

        @reckon.tool(project=p, run_id="r1", client=AGENT, guard=False)
        def send_email(to):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/send", data=b"x", timeout=5)

        @reckon.tool(project=p, run_id="r1", client=AGENT, guard=False)
        def refund(amount_cents):
            if amount_cents < 0:
                raise reckon.NoEffect("amount must be positive", "argument_validation")

        with self.assertRaises(OSError):
            send_email("a")
        with self.assertRaises(reckon.NoEffect):
            refund(-1)
        with self.assertRaises(TypeError):
            refund(1, 2)  # wrong arguments: refused before the tool runs
        self.assertEqual(OPERATOR.all_operations(p), [])
        failures = sorted((e["data"]["error_type"], e["data"]["effect"]) for e in events(p) if e["type"] == "tool.failed")
        self.assertEqual(failures, [("argument_validation", "none"), ("argument_validation", "none"),
                                    ("connection_refused", "none")])

    def test_tool_does_not_run_when_its_start_cannot_be_recorded(self):
        down = reckon.Client(f"http://127.0.0.1:{closed_port()}", token="x", attempts=2, backoff=0.001)
        ran = []

        @reckon.tool(project="p", run_id="r1", client=down, guard=False, source="ag1")
        def refund():
            ran.append(1)

        with self.assertRaises(OSError):
            refund()
        self.assertEqual(ran, [])

    def test_async_tool_and_call_id(self):
        p = project("async")

        @reckon.tool(project=p, run_id="r1", client=AGENT, guard=False)
        async def lookup(key):
            await asyncio.sleep(0)
            return {"key": key}

        self.assertEqual(asyncio.run(lookup("k1", reckon_call_id="call_42")), {"key": "k1"})
        hist = OPERATOR.history(p, "r1", "call_42")
        self.assertEqual([e["type"] for e in hist], ["tool.started", "tool.completed"])

    def test_report_run(self):
        p = project("runs")
        r = reckon.Reckon(p, "r1", AGENT, guard=False)
        r.report_run("run.started", plan_summary="refund order 5521")
        r.report_run("run.completed")
        self.assertEqual(OPERATOR.get_run("r1", p)["status"], "completed")


if __name__ == "__main__":
    unittest.main()
