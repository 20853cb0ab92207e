"""The client's pure parts: the SSE parser, error classification, the settlement rule."""

import io
import socket
import unittest
import urllib.error

import reckon
from reckon.client import parse_sse


class UnitTest(unittest.TestCase):
    def test_parse_sse(self):
        body = io.BytesIO(b': keep-alive\n\nevent: ready\nid: 7\ndata: {"cursor": 7}\n\n'
                          b"event: operation.reconciled\r\nid: 9\r\ndata: a\r\ndata: b\r\n\r\n")
        self.assertEqual(list(parse_sse(body)), [
            {"id": "7", "event": "ready", "data": {"cursor": 7}},
            {"id": "9", "event": "operation.reconciled", "data": "a\nb"},
        ])

    def test_classify_error(self):
        c = reckon.classify_error
        self.assertEqual(c(reckon.NoEffect("bad", "argument_validation")), ("none", "argument_validation"))
        self.assertEqual(c(urllib.error.URLError(ConnectionRefusedError(111, "refused"))), ("none", "connection_refused"))
        self.assertEqual(c(urllib.error.URLError(socket.gaierror(-2, "unknown name"))), ("none", "not_reached"))
        self.assertEqual(c(urllib.error.URLError(socket.timeout("timed out"))), ("uncertain", "timeout"))
        self.assertEqual(c(TimeoutError()), ("uncertain", "timeout"))
        self.assertEqual(c(ConnectionResetError()), ("uncertain", "connection_lost"))
        self.assertEqual(c(urllib.error.HTTPError("http://x", 500, "err", None, None)), ("uncertain", "HTTPError"))
        self.assertEqual(c(KeyError("k")), ("uncertain", "KeyError"))
        err = RuntimeError("landed")
        err.reckon_effect = "occurred"
        self.assertEqual(c(err), ("occurred", "tool_error"))
        try:
            try:
                raise ConnectionResetError()
            except ConnectionResetError as inner:
                raise RuntimeError("wrapped") from inner
        except RuntimeError as outer:
            self.assertEqual(c(outer), ("uncertain", "connection_lost"))

    def test_settlement_in(self):
        def ev(type_, **data):
            return {"type": type_, "data": {"operation_id": "op-1", **data}}
        self.assertIsNone(reckon.settlement_in([ev("tool.started"), ev("tool.failed", effect="uncertain")], "op-1"))
        self.assertIsNone(reckon.settlement_in([ev("operation.reconciled", effect="unknown")], "op-1"))
        self.assertEqual(reckon.settlement_in([ev("operation.reconciled", effect="occurred", note="n")], "op-1")["note"], "n")
        self.assertIsNone(reckon.settlement_in([ev("tool.completed")], "op-2"))


if __name__ == "__main__":
    unittest.main()
