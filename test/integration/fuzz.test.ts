import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { FakeSlack, signSlackRequest } from "../fakes/slack.js";
import { FakeTelegram } from "../fakes/telegram.js";
import { startTestApp, type TestApp } from "../harness.js";
import { seededRandom } from "../helpers.js";

/**
 * A bounded fuzz run (issue 12): hostile bodies over HTTP, frames over both sockets, signed and
 * unsigned webhook bodies, and hostile tool arguments from the (fake) model. Nothing answers 5xx,
 * nothing escapes as an uncaught error, the sockets and the process stay up, memory stays bounded.
 * Deterministic: a seeded generator, fixed counts.
 */

const TG_SECRET = "tg-webhook-secret-123";
const SLACK_SECRET = "slack-signing-secret-123";
const COUNTS = { http: 400, ws: 300, webchat: 150, webhooks: 200 };

/** A seeded PRNG with helpers, so a failure reproduces. */
function rng(seed: number) {
  const next = seededRandom(seed);
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
  return { next, int, pick };
}
type Rng = ReturnType<typeof rng>;

const METHODS = [
  "health",
  "sessions.list",
  "sessions.history",
  "sessions.patch",
  "sessions.delete",
  "chat.send",
  "agent.wait",
  "runs.get",
  "tools.invoke",
  "tools.list",
  "pairing.list",
  "pairing.approve",
  "pairing.deny",
  "cron.list",
  "nope",
  "",
];

const deep = (n: number, open = "[", close = "]") => `${open.repeat(n)}${close.repeat(n)}`;
const deepObj = (n: number) => `${'{"a":'.repeat(n)}1${"}".repeat(n)}`;

function value(r: Rng, depth = 0): unknown {
  switch (r.int(depth > 3 ? 6 : 9)) {
    case 0:
      return null;
    case 1:
      return r.next() < 0.5;
    case 2:
      return r.pick([0, -1, 1e308, -0, 2 ** 53 + 1, 0.5, 42]);
    case 3:
      return r.pick([
        "",
        "main",
        "agent:main:main",
        "agent:x:y:z",
        "\u202e\u0000\ud800",
        "x".repeat(r.int(5000)),
      ]);
    case 4:
      return r.pick(["../../etc/passwd", "%00", "<script>", "__proto__", "constructor"]);
    case 5:
      return `s${r.int(1000)}`;
    case 6:
      return Array.from({ length: r.int(5) }, () => value(r, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = r.int(5); i > 0; i--)
        o[
          r.pick([
            "sessionKey",
            "limit",
            "message",
            "tool",
            "args",
            "patch",
            "__proto__",
            "runId",
            "timeoutMs",
            "code",
            "channel",
            "x",
          ])
        ] = value(r, depth + 1);
      return o;
    }
  }
}

/** One hostile body: broken JSON, deep nesting, odd ids, random envelopes, binary. */
function body(r: Rng): string {
  switch (r.int(10)) {
    case 0:
      return `{"id":${deep(5000 + r.int(20000))},"method":"health"}`;
    case 1:
      return `{"method":"health","params":${deepObj(100 + r.int(3000))}}`;
    case 2:
      return JSON.stringify({ id: value(r), method: r.pick(METHODS), params: value(r) });
    case 3:
      return JSON.stringify({ id: r.int(100), method: r.pick(METHODS), params: value(r) });
    case 4:
      return r.pick([
        "",
        "{",
        "[",
        "null",
        "1",
        '"x"',
        "[]",
        "{}",
        "{nope",
        "\u0000\u0001",
        '{"__proto__":{"x":1}}',
      ]);
    case 5:
      return Buffer.from(Array.from({ length: r.int(200) }, () => r.int(256))).toString("latin1");
    case 6:
      return JSON.stringify({
        id: "t",
        method: "tools.invoke",
        params: {
          sessionKey: "main",
          tool: r.pick([
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn",
            "subagents",
            "session_status",
            "x",
          ]),
          args: value(r),
        },
      });
    case 7:
      return JSON.stringify({
        id: 1,
        method: "chat.send",
        params: { sessionKey: value(r), message: value(r), timeoutSeconds: r.pick([0, 0.01, -1, "x"]) },
      });
    case 8:
      return `{"id":1,"method":"health","params":{"s":"${"\\".repeat(r.int(3) * 2 + 1)}"}`;
    default:
      return `{"a":"${"[".repeat(r.int(50000))}"}`;
  }
}

let tg: FakeTelegram;
let slack: FakeSlack;
let model: OpenAIFake;
let t: TestApp;
let port: number;
const escaped: unknown[] = [];
const onError = (err: unknown) => escaped.push(err);

beforeAll(async () => {
  tg = await FakeTelegram.start();
  slack = await FakeSlack.start();
  model = await startOpenAIFake();
  t = await startTestApp(
    {
      models: {
        default: "fake/m",
        providers: { fake: { kind: "openai", baseUrl: model.url, maxRetries: 0 } },
      },
      tools: { profile: "full" },
      channels: {
        telegram: {
          accounts: {
            default: { token: tg.token, apiRoot: tg.apiRoot, mode: "webhook", webhookSecret: TG_SECRET },
          },
        },
        slack: {
          accounts: {
            default: {
              botToken: slack.botToken,
              signingSecret: SLACK_SECRET,
              mode: "http",
              apiUrl: slack.apiUrl,
            },
          },
        },
      },
    },
    { listen: true },
  );
  port = t.app.address?.port ?? 0;
  process.on("uncaughtException", onError);
  process.on("unhandledRejection", onError);
});
afterAll(async () => {
  process.off("uncaughtException", onError);
  process.off("unhandledRejection", onError);
  await t?.stop();
  await tg?.close();
  await slack?.close();
  await model?.close();
});

function send(opts: { method: string; path: string; headers: Record<string, string>; body?: string }) {
  return new Promise<number>((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        agent: false,
        method: opts.method,
        path: opts.path,
        // A fixed length (not chunked): an early 4xx then ends the exchange cleanly.
        headers: {
          ...opts.headers,
          ...(opts.body !== undefined ? { "content-length": String(Buffer.byteLength(opts.body)) } : {}),
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error(`timeout: ${opts.method} ${opts.path}`)));
    req.on("error", (err) =>
      reject(
        new Error(
          `${err.message}: ${opts.method} ${opts.path} ${JSON.stringify(opts.headers)} ${String(opts.body).slice(0, 120)}`,
        ),
      ),
    );
    req.end(opts.body);
  });
}

function socket(path: string): Promise<{ ws: WebSocket; frames: string[]; closed: () => boolean }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`);
    const frames: string[] = [];
    let closed = false;
    ws.on("message", (d) => frames.push(d.toString()));
    ws.on("close", () => {
      closed = true;
    });
    ws.once("open", () => resolve({ ws, frames, closed: () => closed }));
    ws.once("error", reject);
  });
}

/** Resolves with the first frame after `n` frames that satisfies `pred` (bounded by count and time). */
function waitFrame(
  frames: string[],
  pred: (f: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let tries = 0;
    const tick = () => {
      for (const raw of frames) {
        try {
          const f = JSON.parse(raw) as Record<string, unknown>;
          if (pred(f)) return resolve(f);
        } catch {
          // not JSON: not ours
        }
      }
      if (++tries > 3000) return reject(new Error("no matching frame"));
      setTimeout(tick, 10);
    };
    tick();
  });
}

describe("fuzz", () => {
  it("HTTP, both sockets, webhooks and model tool arguments: no 5xx, no crash, bounded memory", {
    timeout: 240_000,
  }, async () => {
    const r = rng(12);
    const rssBefore = process.memoryUsage().rss;
    const statuses = new Map<number, number>();
    const count = (s: number) => statuses.set(s, (statuses.get(s) ?? 0) + 1);
    const auth = { authorization: `Bearer ${t.token}`, host: `127.0.0.1:${port}` };

    // HTTP: /rpc with random bodies, content types, hosts and origins; other paths and methods.
    for (let i = 0; i < COUNTS.http; i++) {
      const headers: Record<string, string> = { ...auth };
      const type = r.pick([
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "",
        "application/x-www-form-urlencoded",
      ]);
      if (type) headers["content-type"] = type;
      if (r.next() < 0.1)
        headers.origin = r.pick(["http://evil.example", "null", `http://127.0.0.1:${port}`]);
      if (r.next() < 0.1) headers.host = r.pick(["evil.example", "", "[::1", "a:b:c"]);
      if (r.next() < 0.05) delete headers.authorization;
      const path =
        r.next() < 0.85
          ? "/rpc"
          : r.pick(["/", "/dashboard", "/ws", "/healthz", "/rpc?x=%zz", "/../../etc", "/hooks/x"]);
      const method =
        path === "/rpc"
          ? r.next() < 0.95
            ? "POST"
            : r.pick(["GET", "PUT", "DELETE", "OPTIONS"])
          : r.pick(["GET", "POST"]);
      const status = await send({ method, path, headers, body: method === "GET" ? undefined : body(r) });
      count(status);
      expect(status, `${method} ${path}`).toBeLessThan(500);
    }

    // /ws: random frames, text and binary; the socket must still answer afterwards.
    const rpcSock = await socket(`/ws?token=${t.token}`);
    for (let i = 0; i < COUNTS.ws; i++) {
      const b = body(r);
      rpcSock.ws.send(r.next() < 0.1 ? Buffer.from(b, "latin1") : b);
    }
    rpcSock.ws.send(JSON.stringify({ id: "alive", method: "health" }));
    expect(await waitFrame(rpcSock.frames, (f) => f.id === "alive")).toMatchObject({ ok: true });
    expect(rpcSock.closed()).toBe(false);
    expect(rpcSock.frames.some((f) => f.includes('"INTERNAL"'))).toBe(false);

    // /webchat/ws: random frames; then a real message still gets its ack.
    const chat = await socket(`/webchat/ws?v=fuzz-visitor-1&token=${t.token}`);
    for (let i = 0; i < COUNTS.webchat; i++) {
      chat.ws.send(
        r.next() < 0.5
          ? body(r)
          : JSON.stringify({ type: r.pick(["message", "ping", "x", ""]), id: value(r), text: value(r) }),
      );
    }
    chat.ws.send(JSON.stringify({ type: "message", id: "alive", text: "still there?" }));
    expect(await waitFrame(chat.frames, (f) => f.type === "ack" && f.id === "alive")).toBeTruthy();
    expect(chat.closed()).toBe(false);

    // Webhooks: unsigned, wrongly signed and correctly signed hostile bodies.
    for (let i = 0; i < COUNTS.webhooks; i++) {
      const raw =
        r.next() < 0.5
          ? body(r)
          : JSON.stringify({
              update_id: r.pick([r.int(1e6), "x", -1, null]),
              message: value(r),
              type: r.pick(["event_callback", "url_verification", "x"]),
              event: value(r),
              event_id: `Ev${i}`,
              challenge: value(r),
            });
      const tgHook = r.next() < 0.5;
      const headers: Record<string, string> = { "content-type": "application/json", host: "public.example" };
      if (tgHook) {
        if (r.next() < 0.8) headers["x-telegram-bot-api-secret-token"] = TG_SECRET;
      } else if (r.next() < 0.8) Object.assign(headers, signSlackRequest(SLACK_SECRET, raw));
      const status = await send({
        method: "POST",
        path: tgHook ? "/hooks/telegram/default" : "/hooks/slack/default/events",
        headers,
        body: raw,
      });
      count(status);
      expect(status, `webhook ${tgHook ? "telegram" : "slack"}: ${raw.slice(0, 200)}`).toBeLessThan(500);
    }

    // Tool arguments from the model: broken JSON, deep nesting, wrong types, huge strings.
    const hostileArgs = [
      "{",
      deep(50_000),
      deepObj(5000),
      `{"sessionKey":${deep(3000)}}`,
      '{"sessionKey":null,"limit":"x"}',
      JSON.stringify({ task: "x".repeat(200_000) }),
      JSON.stringify({ sessionKey: "main", message: { nested: [1, 2, { a: "\u202e" }] } }),
      '"just a string"',
      "[1,2,3]",
      "null",
    ];
    const tools = [
      "sessions_list",
      "sessions_history",
      "sessions_send",
      "sessions_spawn",
      "subagents",
      "session_status",
      "no_such_tool",
    ];
    for (const [i, args] of hostileArgs.entries()) {
      model.enqueue(
        { toolCalls: tools.map((name) => ({ name, arguments: args })) },
        { text: `survived ${i}` },
      );
      const res = await t.rpc("chat.send", {
        sessionKey: `agent:main:fuzz${i}`,
        message: "go",
        timeoutSeconds: 60,
      });
      expect(res.ok).toBe(true);
      expect(res.result).toMatchObject({ status: "ok", reply: `survived ${i}` });
    }

    // Still alive and answering over every path.
    expect(await send({ method: "GET", path: "/healthz", headers: { host: `127.0.0.1:${port}` } })).toBe(200);
    expect((await t.rpc("health")).ok).toBe(true);
    rpcSock.ws.close();
    chat.ws.close();
    expect(escaped).toEqual([]);
    const grownMb = (process.memoryUsage().rss - rssBefore) / 1024 / 1024;
    expect(grownMb).toBeLessThan(400);
    expect([...statuses.keys()].every((s) => s < 500)).toBe(true);
    console.log(
      `fuzz: ${[...statuses.entries()].map(([s, n]) => `${s}×${n}`).join(" ")}; rss +${grownMb.toFixed(0)} MB`,
    );
  });
});
