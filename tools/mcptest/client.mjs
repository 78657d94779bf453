// client.mjs drives the official TypeScript MCP client (@modelcontextprotocol/sdk)
// for provlog's proxy tests. It reads one JSON plan (from argv[2], or stdin
// when no argument is given), runs its steps in order over one connection and
// prints one JSON report on stdout. It exits 0 when it could connect, whatever
// the steps returned: the report says what each step got.
//
// Plan:
//   {
//     "transport": "stdio" | "http",
//     "command": "/path/to/server", "args": [...], "env": {...},  // stdio
//     "url": "http://127.0.0.1:PORT/mcp", "token": "secret",         // http
//     "name": "mcptest", "version": "1.0.0",                         // clientInfo
//     "steps": [
//       {"op": "listTools"},
//       {"op": "callTool", "name": "x", "arguments": {...},
//        "progress": true, "cancelAfterMs": 500, "timeoutMs": 30000},
//       {"op": "listResources"}, {"op": "readResource", "uri": "..."},
//       {"op": "listPrompts"}, {"op": "getPrompt", "name": "...", "arguments": {...}},
//       {"op": "setLoggingLevel", "level": "debug"}
//     ]
//   }
//
// Report:
//   {"server": {...serverInfo}, "protocolVersion": "...",
//    "steps": [{"op": ..., "ok": true, "result": ..., "progress": [...]} |
//              {"op": ..., "ok": false, "error": {"code", "message", "data"}}]}
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(process.argv[2] ?? readFileSync(0, "utf8"));

function makeTransport() {
  if (plan.transport === "stdio") {
    return new StdioClientTransport({
      command: plan.command,
      args: plan.args ?? [],
      env: { ...process.env, ...(plan.env ?? {}) },
      stderr: "inherit",
    });
  }
  if (plan.transport === "http") {
    const headers = {};
    if (plan.token) headers.Authorization = `Bearer ${plan.token}`;
    return new StreamableHTTPClientTransport(new URL(plan.url), { requestInit: { headers } });
  }
  throw new Error(`unknown transport ${JSON.stringify(plan.transport)}`);
}

function describeError(e) {
  return { code: e?.code ?? null, message: String(e?.message ?? e), data: e?.data ?? null };
}

async function runStep(client, step) {
  const progress = [];
  const opts = { timeout: step.timeoutMs ?? 60000 };
  if (step.progress) {
    opts.onprogress = (p) => progress.push(p);
    opts.resetTimeoutOnProgress = true;
  }
  let timer;
  if (step.cancelAfterMs !== undefined) {
    const ac = new AbortController();
    opts.signal = ac.signal;
    timer = setTimeout(() => ac.abort("cancelled by mcptest"), step.cancelAfterMs);
  }
  try {
    let result;
    switch (step.op) {
      case "listTools": result = await client.listTools({}, opts); break;
      case "callTool":
        result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, opts);
        break;
      case "listResources": result = await client.listResources({}, opts); break;
      case "readResource": result = await client.readResource({ uri: step.uri }, opts); break;
      case "listPrompts": result = await client.listPrompts({}, opts); break;
      case "getPrompt":
        result = await client.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, opts);
        break;
      case "setLoggingLevel": result = await client.setLoggingLevel(step.level, opts); break;
      default: throw new Error(`unknown op ${JSON.stringify(step.op)}`);
    }
    return { op: step.op, ok: true, result, progress };
  } catch (e) {
    return { op: step.op, ok: false, error: describeError(e), progress };
  } finally {
    clearTimeout(timer);
  }
}

const client = new Client(
  { name: plan.name ?? "mcptest", version: plan.version ?? "1.0.0" },
  { capabilities: {} },
);
const transport = makeTransport();
try {
  await client.connect(transport);
} catch (e) {
  process.stdout.write(JSON.stringify({ connectError: describeError(e) }) + "\n");
  process.exit(2);
}
const report = {
  server: client.getServerVersion() ?? null,
  protocolVersion: transport.protocolVersion ?? null,
  steps: [],
};
for (const step of plan.steps ?? []) {
  report.steps.push(await runStep(client, step));
}
await client.close();
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(0);
