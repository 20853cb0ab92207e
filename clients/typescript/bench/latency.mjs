// The client's added latency per tool call: the p50 of a wrapped tool
// against the p50 of the same tool bare, alternating call by call so both
// see the same machine load. The tool makes one HTTP request to a local
// server (a stand-in for a real effect).
//
//   RECKON_URL=... RECKON_TOKEN=<agent token> node bench/latency.mjs [calls] [--no-guard]
import { createServer } from "node:http";
import { Reckon } from "../dist/index.js";

const calls = Number(process.argv[2] ?? 300);
const guard = !process.argv.includes("--no-guard");
const srv = createServer((req, res) => { req.resume(); req.on("end", () => res.end("ok")); });
await new Promise((r) => srv.listen(0, "127.0.0.1", r));
const target = `http://127.0.0.1:${srv.address().port}/effect`;
const bare = async (args) => (await fetch(target, { method: "POST", body: JSON.stringify(args) })).text();
const reckon = new Reckon({ project: `bench-${Date.now()}`, runId: "latency", guard });
const wrapped = reckon.tool(bare, { name: "bench.effect" });

const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const tBare = [], tWrapped = [];
for (let i = 0; i < 20; i++) { await bare({ i: -i }); await wrapped({ warm: i }); }
for (let i = 0; i < calls; i++) {
  let t = performance.now(); await bare({ i }); tBare.push(performance.now() - t);
  // Distinct arguments: each call is a new effect, so the guard proceeds.
  t = performance.now(); await wrapped({ i }); tWrapped.push(performance.now() - t);
}
srv.close();
const b = p50(tBare), w = p50(tWrapped);
console.log(`calls ${calls}, guard ${guard ? "on" : "off"}: bare p50 ${b.toFixed(2)} ms, wrapped p50 ${w.toFixed(2)} ms, added ${(w - b).toFixed(2)} ms, ratio ${(w / b).toFixed(1)}x`);
