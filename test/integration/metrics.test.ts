import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AdapterRegistry } from "../../src/delivery/index.js";
import { metrics } from "../../src/telemetry/index.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { eventually, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/**
 * `GET /metrics` (API.md §8.6, issue 51): Prometheus text through prom-client, behind the bearer
 * token unless gateway.metrics.auth is "none"; turns, model calls by class, deliveries, channels,
 * queue depth, cost and the process defaults, with bounded labels (no session keys).
 */

let fake: OpenAIFake;
let t: TestApp;

/** The value of one sample line (`name{labels} value`) in a scrape, or undefined. */
function sample(text: string, line: string): number | undefined {
  const hit = text.split("\n").find((l) => l.startsWith(`${line} `));
  return hit === undefined ? undefined : Number(hit.slice(line.length + 1));
}

async function scrape(url: string, token?: string): Promise<{ status: number; type: string; text: string }> {
  const res = await fetch(`${url}/metrics`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return { status: res.status, type: res.headers.get("content-type") ?? "", text: await res.text() };
}

beforeAll(async () => {
  fake = await startOpenAIFake();
  t = await startTestApp(
    {
      models: {
        default: "fake/gpt-test",
        providers: {
          fake: {
            kind: "openai",
            baseUrl: fake.url,
            maxRetries: 0,
            models: { "gpt-test": { price: { inputPerMTok: 100, outputPerMTok: 200 } } },
          },
        },
      },
    },
    { listen: true },
  );
});
afterAll(async () => {
  await t?.stop();
  await fake?.close();
});

describe("GET /metrics", () => {
  it("needs the bearer token and serves Prometheus text", async () => {
    const url = t.url ?? "";
    expect((await scrape(url)).status).toBe(401);
    expect((await scrape(url, "wrong")).status).toBe(401);
    const ok = await scrape(url, t.token ?? "");
    expect(ok.status).toBe(200);
    expect(ok.type).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const name of [
      "switchboard_turns_total",
      "switchboard_turn_duration_seconds",
      "switchboard_model_calls_total",
      "switchboard_queue_depth",
      "switchboard_deliveries_total",
      "switchboard_channel_up",
      "switchboard_approvals_pending",
      "switchboard_cost_usd_total",
      "process_cpu_seconds_total",
      "nodejs_eventloop_lag_seconds",
    ])
      expect(ok.text, name).toContain(`# TYPE ${name} `);
  });

  it("counts a turn with a tool step, its model calls, its cost, and a failed call by class", async () => {
    fake.enqueue({ toolCalls: [{ name: "sessions_list", arguments: {} }] }, { text: "listed" });
    const sent = await t.rpc("chat.send", { sessionKey: "main", message: "list them", timeoutSeconds: 20 });
    expect(sent.result.status).toBe("ok");
    fake.enqueue({ status: 401, error: "bad key" });
    const failed = await t.rpc("chat.send", { sessionKey: "main", message: "again", timeoutSeconds: 20 });
    expect(failed.result.status).toBe("error");

    const { text } = await scrape(t.url ?? "", t.token ?? "");
    expect(sample(text, 'switchboard_turns_total{status="ok"}')).toBe(1);
    expect(sample(text, 'switchboard_turns_total{status="error"}')).toBe(1);
    expect(sample(text, "switchboard_turn_duration_seconds_count")).toBe(2);
    expect(sample(text, 'switchboard_turn_duration_seconds_bucket{le="+Inf"}')).toBe(2);
    expect(sample(text, 'switchboard_model_calls_total{model="fake/gpt-test",class="ok"}')).toBe(2);
    const failedCalls = text
      .split("\n")
      .filter(
        (l) =>
          l.startsWith('switchboard_model_calls_total{model="fake/gpt-test",class="') &&
          !l.includes('class="ok"'),
      );
    expect(failedCalls).toHaveLength(1);
    expect(failedCalls[0]).toMatch(/class="auth"\} 1$/);
    expect(sample(text, 'switchboard_cost_usd_total{agent="main"}')).toBeGreaterThan(0);
    expect(sample(text, "switchboard_queue_depth")).toBe(0);
    expect(sample(text, "switchboard_approvals_pending")).toBe(0);
    // Bounded labels: no session key anywhere in a label.
    expect(text).not.toContain("agent:main:main");
  });

  it("counts deliveries by channel and status, and says which channel accounts are up", async () => {
    const channel = new MemoryChannel();
    (t.app.services.channels as AdapterRegistry).add(channel);
    await channel.start(async () => {});
    const now = Date.now();
    await t.app.services.store.sessions.put({
      key: "agent:main:metrics",
      sessionId: "metrics-session",
      agentId: "main",
      createdAt: now,
      updatedAt: now,
      deliveryContext: { channel: "memory", to: "chat-m", accountId: "default" },
    });
    const req = { sessionKey: "agent:main:metrics", text: "hello", idempotencyKey: "metrics:1" };
    expect((await t.app.services.delivery.deliver(req)).status).toBe("sent");
    expect((await t.app.services.delivery.deliver(req)).status).toBe("duplicate");
    const nowhere = { sessionKey: "agent:main:nowhere", text: "x", idempotencyKey: "metrics:2" };
    expect((await t.app.services.delivery.deliver(nowhere)).status).toBe("no-route");

    const { text } = await scrape(t.url ?? "", t.token ?? "");
    expect(sample(text, 'switchboard_deliveries_total{channel="memory",status="sent"}')).toBe(1);
    expect(sample(text, 'switchboard_deliveries_total{channel="memory",status="duplicate"}')).toBe(1);
    expect(sample(text, 'switchboard_deliveries_total{channel="none",status="no-route"}')).toBe(1);
    expect(sample(text, 'switchboard_channel_up{channel="memory",account="default"}')).toBe(1);
    await channel.stop();
    const later = await scrape(t.url ?? "", t.token ?? "");
    expect(sample(later.text, 'switchboard_channel_up{channel="memory",account="default"}')).toBe(0);
  });

  it("queue depth counts messages waiting in the lanes", async () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((r) => {
      open = r;
    });
    fake.enqueue({ text: "slow", until: gate });
    const first = t.rpc("chat.send", { sessionKey: "queue", message: "one", timeoutSeconds: 20 });
    await eventually(
      async () => fake.requests.length > 0 && (await t.app.services.pipeline.depth?.()) === 0,
      2000,
      10,
    );
    const second = t.rpc("chat.send", { sessionKey: "queue", message: "two", timeoutSeconds: 20 });
    await eventually(async () => (await t.app.services.pipeline.depth?.()) === 1, 2000, 10);
    const { text } = await scrape(t.url ?? "", t.token ?? "");
    expect(sample(text, "switchboard_queue_depth")).toBe(1);
    open();
    await Promise.all([first, second]);
    expect(metrics.queueDepth).toBeDefined();
  });
});

describe("gateway.metrics", () => {
  it('auth: "none" serves without a token; enabled: false serves nothing', async () => {
    const open = await startTestApp({ gateway: { metrics: { auth: "none" } } }, { listen: true });
    const off = await startTestApp({ gateway: { metrics: { enabled: false } } }, { listen: true });
    try {
      expect((await scrape(open.url ?? "")).status).toBe(200);
      expect((await scrape(off.url ?? "", off.token ?? "")).status).toBe(404);
    } finally {
      await open.stop();
      await off.stop();
    }
  });
});

describeRedis("a worker's metrics", () => {
  const prefix = randomPrefix("metrics");
  const cfg = {
    gateway: { auth: { token: "worker-metrics-token-0123456789" } },
    storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
    queue: { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix },
  };
  afterAll(async () => dropPrefix(prefix));

  it("a worker serves its own on --metrics-port, with the token", async () => {
    const w = await startTestWorker(cfg, { metricsPort: 0, metricsHost: "127.0.0.1" });
    try {
      const url = `http://127.0.0.1:${w.app.metricsAddress?.port}`;
      expect((await scrape(url)).status).toBe(401);
      const ok = await scrape(url, "worker-metrics-token-0123456789");
      expect(ok.status).toBe(200);
      expect(ok.text).toContain("# TYPE switchboard_turns_total counter");
      expect(sample(ok.text, "switchboard_queue_depth")).toBe(0);
    } finally {
      await w.stop();
    }
  });
});
