"""The retry guard and the verdict stream through the Python client, and
the decorator that asks the guard, against a real reckon dev."""

import threading
import unittest

import reckon
from tests.env import AGENT, OPERATOR, eventually, need_guard_routes, project

ARGS = {"order": "5521", "amount_cents": 4200}


def refund_tool(p, effects, **options):
    """A refund that lands, then loses its connection."""
    @reckon.tool(project=p, run_id="r1", client=AGENT, name="payments.refund", **options)
    def refund(order, amount_cents):
        effects.append(order)
        raise ConnectionResetError("connection reset by peer")
    return refund


class GuardTest(unittest.TestCase):
    def setUp(self):
        need_guard_routes()

    def test_hold_then_done(self):
        """The retry of an uncertain call is held and not run; after the ruling occurred it is answered, not run."""
        p = project("guard")
        effects = []
        refund = refund_tool(p, effects)
        self.assertEqual(AGENT.guard(p, "payments.refund", ARGS, run_id="r1")["decision"], "proceed")
        with self.assertRaises(ConnectionResetError):
            refund("5521", 4200, reckon_call_id="call-1")
        with self.assertRaises(reckon.Held) as held:
            refund("5521", 4200, reckon_call_id="call-2")
        self.assertEqual(held.exception.earlier["operation_id"], "call-1")
        self.assertIn("operation call-1 of run r1", str(held.exception))
        self.assertEqual([e["type"] for e in OPERATOR.history(p, "r1", "call-2")], ["tool.started", "tool.blocked"])
        # A replayed call id is held too, and its record does not settle the earlier operation.
        with self.assertRaises(reckon.Held):
            refund("5521", 4200, reckon_call_id="call-1")
        self.assertEqual([e["type"] for e in OPERATOR.history(p, "r1", "call-1")], ["tool.started", "tool.failed"])
        self.assertEqual(AGENT.guard(p, "payments.refund", {**ARGS, "order": "5522"}, run_id="r1")["decision"],
                         "proceed")

        OPERATOR.reconcile(p, "r1", "call-1", "occurred", "payments shows refund R-77")
        with self.assertRaises(reckon.AlreadyDone) as done:
            refund("5521", 4200)
        self.assertRegex(str(done.exception), r'already happened.*"occurred".*decided by operator:op.*refund R-77')
        self.assertEqual(effects, ["5521"])
        eventually(lambda: self.assertEqual(OPERATOR.all_operations(p), []))

    def test_none_lets_the_call_run_again(self):
        p = project("guard-none")
        effects = []
        refund = refund_tool(p, effects)
        with self.assertRaises(ConnectionResetError):
            refund("5521", 4200, reckon_call_id="call-1")
        OPERATOR.reconcile(p, "r1", "call-1", "none", "no refund on the dashboard")
        with self.assertRaises(ConnectionResetError):
            refund("5521", 4200)
        self.assertEqual(effects, ["5521", "5521"])

    def test_watch_and_resume(self):
        p = project("watch")
        effects = []
        refund = refund_tool(p, effects, guard=False)
        for call in ("call-1", "call-2"):
            with self.assertRaises(ConnectionResetError):
                refund("5521", 4200, reckon_call_id=call)
        stream = OPERATOR.watch(p, timeout=20)
        self.assertEqual(next(stream)["event"], "ready")
        OPERATOR.reconcile(p, "r1", "call-1", "occurred", "seen")
        ruling = next(ev for ev in stream if reckon.watched_operation(ev) == "call-1"
                      and ev["event"] == "operation.reconciled")
        stream.close()
        OPERATOR.reconcile(p, "r1", "call-2", "none", "not seen")
        resumed = OPERATOR.watch(p, last_event_id=ruling["id"], timeout=20)
        later = next(ev for ev in resumed if reckon.watched_operation(ev) == "call-2"
                     and ev["event"] == "operation.reconciled")
        resumed.close()
        self.assertEqual(later["data"]["event"]["data"]["effect"], "none")

    def test_wait_for_settlement(self):
        p = project("wait")
        refund = refund_tool(p, [], guard=False)
        with self.assertRaises(ConnectionResetError):
            refund("5521", 4200, reckon_call_id="call-1")
        result = {}

        def wait():
            try:
                result["settled"] = OPERATOR.wait_for_settlement(p, "r1", "call-1", timeout=20)
            except Exception as e:  # noqa: BLE001 - handed to the test's thread
                result["error"] = e
        waiter = threading.Thread(target=wait)
        waiter.start()
        OPERATOR.reconcile(p, "r1", "call-1", "occurred", "ledger entry L-9")
        waiter.join(30)
        if "error" in result:
            raise result["error"]
        self.assertEqual((result["settled"]["effect"], result["settled"]["note"]), ("occurred", "ledger entry L-9"))


if __name__ == "__main__":
    unittest.main()
