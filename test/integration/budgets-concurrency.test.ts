import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/index.js";
import type { AdapterRegistry } from "../../src/delivery/index.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { contentText, type OpenAIFake, type RecordedRequest, startOpenAIFake } from "../fakes/openai.js";
import { memoryInbound, startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { eventually, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/**
 * Budgets under concurrency through the real pipeline (API.md §8.4, issue 49), on both queue
 * drivers: the loopback OpenAI-compatible model reports usage, priced at $1000 per million tokens
 * ($0.001 a token), so the spend is what the runs really cost. `agent:main` may spend $1 a day
 * (notice at 50%), `agent:ops` $0.50.
 *
 * - "big …" costs $0.96 (900 + 60 tokens); any other message $0.08 (40 + 40), after 100 ms;
 * - "tool …" first asks for session_status ($0.96), then answers ($0.08).
 */
const CALL = 0.08;
const LIMIT = 1;

function answer(req: RecordedRequest) {
  const messages = req.body.messages ?? [];
  const last = messages.at(-1);
  const user = contentText([...messages].reverse().find((m) => m.role === "user")?.content);
  if (user.includes("big")) return { text: "spent", usage: { prompt: 900, completion: 60 } };
  if (user.includes("tool") && last?.role !== "tool")
    return { toolCalls: [{ name: "session_status", arguments: {} }], usage: { prompt: 900, completion: 60 } };
  return { text: "ok", usage: { prompt: 40, completion: 40 }, delayMs: 100 };
}

function config(fake: OpenAIFake): Partial<ConfigInput> {
  return {
    agents: { list: [{ id: "main" }, { id: "ops" }] },
    models: {
      default: "oa/m",
      providers: {
        oa: {
          kind: "openai",
          baseUrl: fake.url,
          // the output cap bounds a call's expected cost: (prompt + 100 tokens) × $0.001
          models: { m: { maxOutputTokens: 100, price: { inputPerMTok: 1000, outputPerMTok: 1000 } } },
        },
      },
    },
    usage: {
      budgets: [
        { scope: "agent:main", period: "day", maxCostUsd: LIMIT, warnAt: 0.5 },
        { scope: "agent:ops", period: "day", maxCostUsd: 0.5 },
      ],
    },
  };
}

const inbound = (text: string) => memoryInbound({ text });

interface Setup {
  /** Gateways taking chat.send (round robin); the first has the memory channel. */
  gateways: TestApp[];
  channel: MemoryChannel;
  fake: OpenAIFake;
}

/** The same story on either driver. */
function budgetStory(label: string, setup: () => Setup) {
  it(`${label}: a notice at warnAt, then 20 parallel chat.sends at the limit overspend by at most one call`, async () => {
    const { gateways, channel, fake } = setup();
    const g0 = gateways[0] as TestApp;
    // $0.96 from the chat: past warnAt (50%), one notice to that chat
    const first = await g0.app.router.handle(inbound("big spend"));
    expect(first.accepted).toBe(true);
    await g0.app.services.pipeline.wait(first.runId as string, 20_000);
    const notice =
      /^Budget agent:main per day has reached 50% \(\$0\.9600 of \$1\); it resets at \d{4}-\d{2}-\d{2}T00:00:00\.000Z\.$/;
    await eventually(() => expect(channel.sent.some((s) => notice.test(s.text))).toBe(true), 15_000);
    const calls0 = fake.chatRequests().length;

    const sends = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (gateways[i % gateways.length] as TestApp).rpc("chat.send", {
          sessionKey: `agent:main:par${i}`,
          message: "hi",
          timeoutSeconds: 30,
        }),
      ),
    );
    const admitted = sends.filter((r) => r.ok);
    const refused = sends.filter((r) => !r.ok);
    // $0.96 < $1: a turn is admitted; its hold brings settled + reserved past the limit
    expect(admitted.length).toBeGreaterThanOrEqual(1);
    // an admitted turn is answered; a refused one is an RPC error naming the budget, with no run
    for (const r of admitted) expect(r.result).toMatchObject({ status: "ok", reply: "ok" });
    for (const r of refused) {
      expect(r.error?.code).toBe("BUDGET_EXCEEDED");
      expect(r.error?.message).toMatch(/^budget agent:main per day is spent \(.*\); it resets at \d{4}-/);
    }
    for (const [i, r] of sends.entries())
      if (!r.ok) expect(await g0.app.services.store.runs.listBySession(`agent:main:par${i}`, 5)).toEqual([]);
    expect(fake.chatRequests().length - calls0).toBe(admitted.length);
    // what was really spent (every gateway reads the same account) is past the limit by less than a call
    for (const g of gateways) {
      const got = await g.rpc("usage.get", { scope: "agent:main", period: "day" });
      const spent = got.result.budget.spent.costUsd as number;
      expect(spent).toBeCloseTo(0.96 + admitted.length * CALL, 9);
      expect(spent).toBeGreaterThan(LIMIT);
      expect(spent).toBeLessThanOrEqual(LIMIT + CALL + 1e-9);
    }

    // a channel message now: not answered, one line naming the budget and when it resets
    const before = fake.chatRequests().length;
    const again = inbound("again");
    const r = await g0.app.router.handle(again);
    expect(r).toMatchObject({ accepted: false, dropped: "budget" });
    expect(channel.sent.at(-1)?.text).toMatch(
      /^Not answered: budget agent:main per day is spent \(\$1\.\d{4} of \$1\); it resets at \d{4}-\d{2}-\d{2}T00:00:00\.000Z\.$/,
    );
    // a redelivery is not told twice; the notice went out once in all
    const lines = channel.sent.length;
    await g0.app.router.handle(again);
    expect(channel.sent.length).toBe(lines);
    expect(channel.sent.filter((s) => s.text.startsWith("Budget ")).length).toBe(1);
    expect(fake.chatRequests().length).toBe(before);
  }, 60_000);

  it(`${label}: every model call of a run reserves first: the call after a spent one is refused`, async () => {
    const { gateways, fake } = setup();
    const before = fake.chatRequests().length;
    const r = await (gateways[0] as TestApp).rpc("chat.send", {
      sessionKey: "agent:ops:tools",
      message: "tool please",
      timeoutSeconds: 30,
    });
    // admitted ($0 < $0.50); its first call cost $0.96, so its second was never made
    expect(r.result).toMatchObject({ status: "error" });
    expect(r.result.error).toMatch(/budget agent:ops per day is spent \(\$0\.9600 of \$0\.5\)/);
    expect(fake.chatRequests().length - before).toBe(1);
    const next = await (gateways[0] as TestApp).rpc("chat.send", {
      sessionKey: "agent:ops:x",
      message: "hi",
    });
    expect(next.error?.code).toBe("BUDGET_EXCEEDED");
  }, 60_000);
}

describe("budgets under concurrency, local queue (memory ledger)", () => {
  let fake: OpenAIFake;
  let gateway: TestApp;
  const channel = new MemoryChannel();
  beforeAll(async () => {
    fake = await startOpenAIFake();
    fake.setDefault(answer);
    gateway = await startTestApp({ ...config(fake), queue: { driver: "local", concurrency: 32 } });
    (gateway.app.services.channels as AdapterRegistry).add(channel);
    await channel.start(async () => {});
  }, 30_000);
  afterAll(async () => {
    await gateway?.stop();
    await fake?.close();
  });
  budgetStory("local", () => ({ gateways: [gateway], channel, fake }));
});

describeRedis("budgets under concurrency, bullmq (Redis ledger, two gateways and a worker)", () => {
  const prefix = randomPrefix("budgets");
  let fake: OpenAIFake;
  const gateways: TestApp[] = [];
  let worker: { stop(): Promise<void> } | undefined;
  const channel = new MemoryChannel();
  beforeAll(async () => {
    fake = await startOpenAIFake();
    fake.setDefault(answer);
    const cfg = (runTurns: boolean): Partial<ConfigInput> => ({
      ...config(fake),
      storage: { driver: "redis", redisUrl: REDIS_URL, prefix },
      queue: { driver: "bullmq", redisUrl: REDIS_URL, prefix, concurrency: 32, runTurns },
    });
    // the first gateway runs turns too, the second only accepts them: runs settle in two processes
    const first = await startTestApp(cfg(true));
    gateways.push(first, await startTestApp(cfg(false)));
    (first.app.services.channels as AdapterRegistry).add(channel);
    await channel.start(async () => {});
    worker = await startTestWorker(cfg(true));
  }, 30_000);
  afterAll(async () => {
    await worker?.stop();
    for (const g of gateways) await g.stop();
    await fake?.close();
    await dropPrefix(prefix);
  }, 30_000);
  budgetStory("bullmq", () => ({ gateways, channel, fake }));
});
