"""The HTTP client against a real reckon dev."""

import unittest
import urllib.request
from datetime import datetime, timezone

import reckon
from tests.env import AGENT, OPERATOR, URL, eventually, project


def ev(p, run, op, what, type_, **data):
    return {"source_id": "ag1", "event_id": f"{p}/{run}/{op}/{what}", "project": p, "run_id": run, "type": type_,
            "ts": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"), "actor": "agent",
            "data": {"operation_id": op, **data}}


class ClientTest(unittest.TestCase):
    def test_retry_after_lost_answer_is_repeated(self):
        """The first attempt lands, its answer is lost; the retry sends the same bytes and is answered repeated."""
        p = project("ingest")
        c = reckon.Client(URL, token=AGENT.token, backoff=0.01)
        real = urllib.request.urlopen
        sent = []

        def lossy(req, timeout=None):
            res = real(req, timeout=timeout)
            sent.append(req.data)
            if len(sent) == 1:
                res.read()
                res.close()
                raise ConnectionResetError("answer lost")
            return res

        batch = [ev(p, "r1", "op-1", "started", "tool.started", tool="payments.refund", args={"order": "5521"}),
                 ev(p, "r1", "op-1", "failed", "tool.failed", error_type="timeout", error="no answer", effect="uncertain")]
        urllib.request.urlopen = lossy
        try:
            results = c.ingest(batch)
        finally:
            urllib.request.urlopen = real
        self.assertEqual(len(sent), 2)
        self.assertEqual(sent[0], sent[1])
        self.assertEqual([r["status"] for r in results], ["repeated", "repeated"])
        ops = OPERATOR.all_operations(p)
        self.assertEqual([(o["operation_id"], o["state"]) for o in ops], [("op-1", "failed_uncertain")])

    def test_batches_of_1000(self):
        p = project("batches")
        events = [ev(p, "r1", f"op-{i}", "started", "tool.started", tool="kv.put", args={"i": i}) for i in range(1001)]
        results = AGENT.ingest(events)
        self.assertEqual(len(results), 1001)
        self.assertEqual({r["status"] for r in results}, {"accepted"})
        self.assertEqual(results[1000]["event_id"], events[1000]["event_id"])

    def test_history_reconcile_and_listing(self):
        p = project("reconcile")
        AGENT.ingest([ev(p, "r1", "op-1", "started", "tool.started", tool="crm.update", args={"id": 7}),
                      ev(p, "r1", "op-1", "failed", "tool.failed", error_type="timeout", error="t", effect="uncertain")])
        first = OPERATOR.reconcile(p, "r1", "op-1", "occurred", "CRM shows the update", evidence={"audit": "A-1"},
                                   idempotency_key=f"k-{p}")
        again = OPERATOR.reconcile(p, "r1", "op-1", "occurred", "CRM shows the update", evidence={"audit": "A-1"},
                                   idempotency_key=f"k-{p}")
        self.assertEqual(first["type"], "operation.reconciled")
        self.assertEqual(again["event_id"], first["event_id"])
        hist = OPERATOR.history(p, "r1", "op-1")
        self.assertEqual([e["type"] for e in hist], ["tool.started", "tool.failed", "operation.reconciled"])
        self.assertEqual(reckon.settlement_in(hist, "op-1")["effect"], "occurred")
        eventually(lambda: self.assertEqual(OPERATOR.all_operations(p), []))
        self.assertEqual(OPERATOR.attention(p)["operations"], [])
        self.assertEqual(OPERATOR.verdicts(p)["verdicts"], [])
        self.assertIn(p, OPERATOR.projects()["projects"])

    def test_agent_token_may_only_ingest(self):
        with self.assertRaises(reckon.ReckonError) as cm:
            AGENT.list_operations("x")
        self.assertEqual(cm.exception.status, 403)
        self.assertIn("role agent", cm.exception.message)
        self.assertEqual(AGENT.whoami(), {"name": "ag1", "role": "agent"})

    def test_refused_event_names_the_field(self):
        bad = ev(project("bad"), "r1", "op-1", "started", "tool.started", tool="t")
        bad["ts"] = "yesterday"
        with self.assertRaises(reckon.ReckonError) as cm:
            AGENT.ingest([bad])
        self.assertEqual(cm.exception.status, 400)
        self.assertEqual(cm.exception.event_index, 0)
        self.assertIn('field "ts"', cm.exception.message)

    def test_defaults_from_environment(self):
        import os
        saved = {k: os.environ.get(k) for k in ("RECKON_URL", "RECKON_TOKEN")}
        os.environ["RECKON_URL"], os.environ["RECKON_TOKEN"] = URL + "/", AGENT.token
        try:
            c = reckon.Client()
            self.assertEqual(c.url, URL)
            self.assertEqual(c.whoami()["name"], "ag1")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_start_and_read_a_kernel_run(self):
        p = project("run")
        self.assertEqual(OPERATOR.start_run(p, {"steps": [{"tool": "run_command", "args": {"command": "echo ok"}}]},
                                            run_id="deploy-1"), {"project": p, "run_id": "deploy-1"})

        def completed():
            run = OPERATOR.get_run("deploy-1", p)
            self.assertEqual(run["status"], "completed")
            self.assertEqual([e["type"] for e in run["events"]],
                             ["run.started", "tool.started", "tool.completed", "run.completed"])
        eventually(completed, limit=30)


if __name__ == "__main__":
    unittest.main()
