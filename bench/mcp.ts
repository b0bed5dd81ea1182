/**
 * An MCP tool call through the gateway's client (API.md §8.3, issue 48 "Measured"): a stdio server
 * (bench/mcp-server.ts) called through the tool registry as a turn calls it (policy, the server's
 * schema, the call, the result for the model). Prints the gateway's CPU per call beside the
 * server's own (budget: ≤ 2 ms of gateway CPU over the server's time), and that 100 parallel
 * sessions share one server process.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { McpManager } from "../src/agent/mcp/manager.js";
import { ToolRegistry } from "../src/agent/tool-registry.js";
import { parseConfig } from "../src/config/index.js";
import { silentLogger } from "../src/log.js";
import type { Services } from "../src/services/index.js";
import type { SessionEntry } from "../src/store/types.js";
import { allTools } from "../src/tools/index.js";
import type { ToolCaller } from "../src/tools/types.js";

const CALLS = 2000;
const server = fileURLToPath(new URL("./mcp-server.js", import.meta.url));
const config = parseConfig({
  mcp: { servers: { bench: { command: process.execPath, args: [server] } } },
  agents: { list: [{ id: "main", mcp: ["bench"] }] },
});
const mcp = new McpManager({ config, logger: silentLogger(), baseDir: process.cwd(), version: "bench" });
const tools = new ToolRegistry(allTools(), mcp);
const services = { config } as Services;
const caller = (i: number): ToolCaller => ({
  sessionKey: `agent:main:s${i}`,
  agentId: "main",
  entry: { key: `agent:main:s${i}`, agentId: "main" } as SessionEntry,
  depth: 0,
  sandboxed: false,
});
const call = async (name: string, args: Record<string, unknown>, i = 0) => {
  const out = await tools.invoke(name, args, {
    services,
    caller: caller(i),
    signal: new AbortController().signal,
  });
  if (!out.ok || out.result.status !== "ok") throw new Error(`call failed: ${JSON.stringify(out)}`);
  return String(out.result.text);
};

await tools.prepare(caller(0));
for (let i = 0; i < 300; i++) await call("bench__echo", { text: `warm ${i}` });

const serverCpu0 = Number(await call("bench__cpu", {}));
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const walls: number[] = [];
for (let i = 0; i < CALLS; i++) {
  const s = performance.now();
  await call("bench__echo", { text: `hello ${i}` });
  walls.push(performance.now() - s);
}
const wall = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
const serverCpu = Number(await call("bench__cpu", {})) - serverCpu0;
walls.sort((a, b) => a - b);
const ms = (us: number) => (us / 1000 / CALLS).toFixed(3);

const pids = new Set<number | undefined>();
await Promise.all(
  Array.from({ length: 100 }, async (_, i) => {
    await call("bench__echo", { text: `parallel ${i}` }, i);
    pids.add(mcp.connection("bench")?.pid);
  }),
);

process.stdout.write(
  [
    `stdio MCP tool call, ${CALLS} sequential calls through the tool registry:`,
    `  gateway CPU per call: ${ms(cpu.user + cpu.system)} ms (budget ≤ 2 ms over the server's own time)`,
    `  server CPU per call:  ${ms(serverCpu)} ms`,
    `  wall per call: p50 ${walls[CALLS >> 1]?.toFixed(3)} ms, p99 ${walls[Math.floor(CALLS * 0.99)]?.toFixed(3)} ms (${(CALLS / (wall / 1000)).toFixed(0)} calls/s)`,
    `  100 parallel sessions: ${pids.size} server process`,
    `  load average: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
    "",
  ].join("\n"),
);
await mcp.stop();
