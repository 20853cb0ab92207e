// mcp-session.mjs: one MCP session of the official TypeScript SDK client
// making several tools/call in order, for reckon's gateway interop tests
// (an MCP host that nobody on the project wrote, talking to `reckon
// mcp-gateway` exactly as it would talk to the servers behind it).
//
// usage:
//   node mcp-session.mjs --calls JSON -- COMMAND [ARGS...]     (stdio: starts COMMAND)
//   node mcp-session.mjs --calls JSON --url http://HOST:PORT/mcp
//
// --calls is a JSON array of {"tool": NAME, "args": {...}, "meta": {...}}.
// Prints JSON lines: first {"server": serverInfo, "tools": [full tool definitions]},
// then one {"i": n, "result": CallToolResult} or {"i": n, "error": message} per call.
// A protocol-level failure of a call (the connection broke, a JSON-RPC error) is
// printed and the session goes on with the next call; the process exits 0 when every
// line was printed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function parse(argv) {
  const opts = { calls: [], command: null, url: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") { opts.command = argv.slice(i + 1); break; }
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === "--calls") opts.calls = JSON.parse(v) ?? [];
    else if (a === "--url") opts.url = v;
    else throw new Error(`unknown flag ${a}`);
  }
  if (!opts.url && (!opts.command || opts.command.length === 0)) throw new Error("give --url or -- COMMAND");
  return opts;
}

const line = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

async function main() {
  const opts = parse(process.argv.slice(2));
  const transport = opts.url
    ? new StreamableHTTPClientTransport(new URL(opts.url))
    : new StdioClientTransport({ command: opts.command[0], args: opts.command.slice(1), env: process.env, stderr: "inherit" });
  const client = new Client({ name: "reckon-interop-ts-host", version: "1.0.0" });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    line({ server: client.getServerVersion(), tools });
    for (let i = 0; i < opts.calls.length; i++) {
      const c = opts.calls[i];
      const params = { name: c.tool, arguments: c.args ?? {} };
      if (c.meta) params._meta = c.meta;
      try {
        line({ i, result: await client.callTool(params, undefined, { timeout: 120000 }) });
      } catch (err) {
        line({ i, error: String(err?.message ?? err) });
      }
    }
  } finally {
    await client.close().catch(() => {});
  }
}

main().catch((err) => {
  process.stderr.write(`mcp-session: ${err?.stack ?? err}\n`);
  process.exit(1);
});
