"""The client's added latency per tool call: the p50 of a @reckon.tool
function against the p50 of the same function bare, alternating call by
call. The tool makes one HTTP request to a local server.

    RECKON_URL=... RECKON_TOKEN=<agent token> python3 bench_latency.py [calls] [--no-guard]
"""

import http.server
import statistics
import sys
import threading
import time
import urllib.request

import reckon


class _Effect(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def main():
    calls = int(next((a for a in sys.argv[1:] if a.isdigit()), 300))
    guard = "--no-guard" not in sys.argv
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Effect)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{srv.server_address[1]}/effect"

    def effect(i):
        return urllib.request.urlopen(urllib.request.Request(target, data=str(i).encode()), timeout=10).read()

    wrapped = reckon.tool(project=f"bench-{int(time.time())}", run_id="latency", guard=guard, name="bench.effect")(effect)
    for i in range(20):
        effect(-i)
        wrapped(-1000 - i)
    bare_t, wrapped_t = [], []
    for i in range(calls):
        t = time.perf_counter(); effect(i); bare_t.append(time.perf_counter() - t)
        t = time.perf_counter(); wrapped(i); wrapped_t.append(time.perf_counter() - t)
    srv.shutdown()
    b, w = statistics.median(bare_t) * 1000, statistics.median(wrapped_t) * 1000
    print(f"calls {calls}, guard {'on' if guard else 'off'}: bare p50 {b:.2f} ms, wrapped p50 {w:.2f} ms, "
          f"added {w - b:.2f} ms, ratio {w / b:.1f}x")


if __name__ == "__main__":
    main()
