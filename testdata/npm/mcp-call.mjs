// mcp-call.mjs: one MCP tools/call made by the official TypeScript SDK
// client, for reckon's interop tests (code nobody on the project wrote talks
// to `reckon mcp-test-server`).
//
// usage:
//   node mcp-call.mjs --tool NAME [--args JSON] [--meta JSON] -- COMMAND [ARGS...]   (stdio: starts COMMAND)
//   node mcp-call.mjs --tool NAME [--args JSON] [--meta JSON] --url http://HOST:PORT/mcp
//
// Prints one JSON line: {"server": serverInfo, "tools": [names], "result": CallToolResult}.
// Exits 1 (message on stderr) when the connection or the call fails at the protocol level.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function parse(argv) {
  const opts = { args: {}, meta: undefined, command: null, url: null, tool: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") { opts.command = argv.slice(i + 1); break; }
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === "--tool") opts.tool = v;
    else if (a === "--args") opts.args = JSON.parse(v);
    else if (a === "--meta") opts.meta = JSON.parse(v);
    else if (a === "--url") opts.url = v;
    else throw new Error(`unknown flag ${a}`);
  }
  if (!opts.tool) throw new Error("--tool is required");
  if (!opts.url && (!opts.command || opts.command.length === 0)) throw new Error("give --url or -- COMMAND");
  return opts;
}

async function main() {
  const opts = parse(process.argv.slice(2));
  const transport = opts.url
    ? new StreamableHTTPClientTransport(new URL(opts.url))
    : new StdioClientTransport({ command: opts.command[0], args: opts.command.slice(1), env: process.env, stderr: "inherit" });
  const client = new Client({ name: "reckon-interop-ts-client", version: "1.0.0" });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const params = { name: opts.tool, arguments: opts.args };
    if (opts.meta) params._meta = opts.meta;
    const result = await client.callTool(params);
    process.stdout.write(JSON.stringify({ server: client.getServerVersion(), tools: tools.map((t) => t.name), result }) + "\n");
  } finally {
    await client.close();
  }
}

main().catch((err) => {
  process.stderr.write(`mcp-call: ${err?.stack ?? err}\n`);
  process.exit(1);
});
