/**
 * Failover cost (DESIGN.md budgets: "a failover adds ≤ 5 ms beyond the two fakes' own"): the time
 * from a provider's failure to the fallback's first streamed byte, through the chain, against the
 * same two calls made directly (the failing one, then a streamed one to the fallback). Two loopback
 * fakes in this process: a primary answering 529 at once, and a fallback (OpenAI-compatible, then
 * Anthropic) streaming a short reply. The difference of the medians is what the chain adds.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { loadavg } from "node:os";
import { ConfiguredModels } from "../src/agent/models.js";
import { parseConfig } from "../src/config/index.js";
import { silentLogger } from "../src/log.js";
import type { ModelProvider, ModelRequest } from "../src/services/models.js";

const N = Number(process.env.SB_BENCH_FAILOVER_N ?? 400);

function listen(handler: (req: IncomingMessage, res: ServerResponse, body: string) => void): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => {
      body += d;
    });
    req.on("end", () => handler(req, res, body));
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

const url = (s: Server) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`;

const overloaded = JSON.stringify({ error: { message: "overloaded", type: "server_error", code: null } });

async function main(): Promise<void> {
  const primary = await listen((_req, res) => {
    res.writeHead(529, { "content-type": "application/json" });
    res.end(overloaded);
  });
  const openai = await listen((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    const chunk = (delta: object, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "f", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    res.end(`${chunk({ role: "assistant", content: "hello" })}${chunk({}, "stop")}data: [DONE]\n\n`);
  });
  const anthropic = await listen((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    const ev = (type: string, data: object) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    res.end(
      ev("message_start", {
        message: {
          id: "m",
          type: "message",
          role: "assistant",
          model: "c",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 1, output_tokens: 1 },
        },
      }) +
        ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
        ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "hello" } }) +
        ev("content_block_stop", { index: 0 }) +
        ev("message_delta", {
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { output_tokens: 1 },
        }) +
        ev("message_stop", {}),
    );
  });
  const config = parseConfig({
    models: {
      default: "p/m",
      fallbacks: ["o/m", "a/m"],
      // the breaker stays closed: every call fails over from a called primary
      failover: { failuresToOpen: 1000, cooldownSeconds: 1 },
      providers: {
        p: { kind: "openai", baseUrl: `${url(primary)}/v1`, maxRetries: 0 },
        o: { kind: "openai", baseUrl: `${url(openai)}/v1`, maxRetries: 0 },
        a: { kind: "anthropic", baseUrl: url(anthropic), apiKey: "sk-bench", maxRetries: 0 },
      },
    },
  });
  const models = new ConfiguredModels(config, silentLogger(), process.cwd());
  const base: Omit<ModelRequest, "model"> = {
    system: "you are a bench",
    messages: [{ role: "user", content: "hi" }],
    tools: [],
  };

  /** ms from the call to its first delta (or its end when it fails). */
  async function firstByte(call: (onDelta: (d: string) => void) => Promise<unknown>): Promise<number> {
    const t0 = performance.now();
    let first = 0;
    await call(() => {
      if (first === 0) first = performance.now();
    }).catch(() => undefined);
    return (first || performance.now()) - t0;
  }
  const direct = (p: ModelProvider, onTextDelta: (d: string) => void) =>
    p.complete({ ...base, model: "m", noRetry: true, onTextDelta });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

  for (const [label, fallback] of [
    ["openai-compatible fallback", "o/m"],
    ["anthropic fallback", "a/m"],
  ] as const) {
    const p = models.resolve("p/m").provider;
    const f = models.resolve(fallback).provider;
    const fail: number[] = [];
    const ok: number[] = [];
    const chained: number[] = [];
    for (let i = 0; i < N + 50; i++) {
      const a = await firstByte((d) => direct(p, d));
      const b = await firstByte((d) => direct(f, d));
      const c = await firstByte((d) => models.complete(["p/m", fallback], { ...base, onTextDelta: d }));
      if (i < 50) continue; // warm-up
      fail.push(a);
      ok.push(b);
      chained.push(c);
    }
    const added = median(chained) - median(fail) - median(ok);
    process.stdout.write(
      `failover (${label}): failure → fallback's first byte ${median(chained).toFixed(3)} ms median through the chain; ` +
        `the two calls alone ${median(fail).toFixed(3)} + ${median(ok).toFixed(3)} ms; ` +
        `the chain adds ${added.toFixed(3)} ms (budget ≤ 5 ms) [n=${N}, load ${loadavg()
          .map((l) => l.toFixed(2))
          .join(" ")}]\n`,
    );
  }
  for (const s of [primary, openai, anthropic]) s.closeAllConnections();
  await Promise.all([primary, openai, anthropic].map((s) => new Promise((r) => s.close(r))));
}

await main();
