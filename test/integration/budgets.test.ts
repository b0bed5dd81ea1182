import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import type { AdapterRegistry } from "../../src/delivery/index.js";
import { ensureSession } from "../../src/sessions/service.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { contentText, echoHandler, type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { memoryInbound, startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { REDIS_URL, randomPrefix, tempDir } from "../helpers.js";
import { describeRedis, dropPrefix } from "../redis.js";

/** usage.budgets (API.md §8.4), local queue: a spent `block` budget refuses chat.send with BUDGET_EXCEEDED. */
let fake: OpenAIFake;
beforeAll(async () => {
  fake = await startOpenAIFake();
});
afterAll(async () => fake.close());

/** The fake's model at $1000 per million tokens in and out: 300 tokens cost $0.30. */
const pricedModels = () => ({
  default: "oa/m",
  providers: {
    oa: {
      kind: "openai" as const,
      baseUrl: fake.url,
      models: { m: { price: { inputPerMTok: 1000, outputPerMTok: 1000 } } },
    },
  },
});

/** `n` answered turns of 300 tokens ($0.30 each), in sessions agent:main:<prefix>0… */
async function spendTurns(app: TestApp, prefix: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    fake.enqueue({ text: "ok", usage: { prompt: 200, completion: 100 } });
    const r = await app.rpc("chat.send", {
      sessionKey: `agent:main:${prefix}${i}`,
      message: "hi",
      timeoutSeconds: 10,
    });
    expect(r.result.status).toBe("ok");
  }
}

/**
 * A turn of 2 tokens ($0.002) in a session of its own: under a $0.50 block budget admitted only
 * while no turn's hold (its first call's expected cost: the 4096-token default output cap at
 * $0.001 a token, over $4) is left.
 */
async function probe(app: TestApp): Promise<unknown> {
  fake.setDefault(() => ({ text: "ok", usage: { prompt: 1, completion: 1 } }));
  try {
    const r = await app.rpc("chat.send", {
      sessionKey: "agent:main:probe",
      message: "hi",
      timeoutSeconds: 10,
    });
    return r.ok ? r.result.status : r.error?.code;
  } finally {
    fake.setDefault(echoHandler);
  }
}

describe("budgets", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      models: pricedModels(),
      usage: {
        budgets: [
          { scope: "agent:main", period: "day", maxCostUsd: 0.5 },
          { scope: "session:agent:main:other", period: "day", maxTokens: 1_000_000, action: "warn" },
        ],
      },
    });
  });
  afterAll(async () => t.stop());

  it("admits turns while under the limit, then refuses with BUDGET_EXCEEDED naming the budget and its reset", async () => {
    // 300 tokens at $1000/MTok = $0.30 a turn: the first two are admitted (0 and 0.30 < 0.50)
    await spendTurns(t, "b", 2);
    const before = fake.chatRequests().length;
    const refused = await t.rpc("chat.send", {
      sessionKey: "agent:main:b9",
      message: "hi",
      timeoutSeconds: 10,
    });
    expect(refused.ok).toBe(false);
    expect(refused.error?.code).toBe("BUDGET_EXCEEDED");
    expect(refused.error?.message).toMatch(/agent:main per day.*resets at \d{4}-\d{2}-\d{2}T00:00:00/);
    expect(fake.chatRequests().length).toBe(before);
    // no run was accepted for it
    const runs = await t.app.services.store.runs.listBySession("agent:main:b9", 5);
    expect(runs).toHaveLength(0);
  });
});

describe("a channel budget (the scope the run is charged to)", () => {
  it("chat.send into a session whose chat is on that channel is refused by it, not accepted to fail", async () => {
    const app = await startTestApp({
      models: pricedModels(),
      usage: { budgets: [{ scope: "channel:webchat", period: "day", maxCostUsd: 0.5 }] },
    });
    try {
      // the main bucket's key names no channel: the row's last channel is what its calls are charged to
      const key = "agent:main:main";
      await ensureSession(app.app.services, key, { agentId: "main" });
      await app.app.services.store.sessions.update(key, (cur) =>
        cur ? { ...cur, lastChannel: "webchat" } : null,
      );
      for (let i = 0; i < 2; i++) {
        fake.enqueue({ text: "ok", usage: { prompt: 200, completion: 100 } });
        expect(
          (await app.rpc("chat.send", { sessionKey: key, message: "hi", timeoutSeconds: 10 })).result.status,
        ).toBe("ok");
      }
      const refused = await app.rpc("chat.send", { sessionKey: key, message: "hi", timeoutSeconds: 10 });
      expect(refused.error?.code).toBe("BUDGET_EXCEEDED");
      expect(refused.error?.message).toMatch(/channel:webchat per day/);
    } finally {
      await app.stop();
    }
  });
});

describe("a turn that fails after its admission gives its hold back at once", () => {
  /**
   * $0.50 a day for agent:main: a turn's hold (its first call's expected cost: the 4096-token
   * default output cap at $0.001 a token, over $4) alone refuses every other turn until it is
   * given back, or lapses after 10 minutes.
   */
  const start = () =>
    startTestApp({
      models: pricedModels(),
      usage: { budgets: [{ scope: "agent:main", period: "day", maxCostUsd: 0.5 }] },
    });

  /** Replaces `obj[name]` by a function that throws, until the returned restore is called. */
  function failing<T extends object, K extends keyof T>(
    obj: T,
    name: K,
    when: (...args: never[]) => boolean,
  ) {
    const original = obj[name] as (...args: unknown[]) => unknown;
    (obj as Record<K, unknown>)[name] = (...args: never[]) => {
      if (when(...args)) throw new Error(`injected: ${String(name)} failed`);
      return original.apply(obj, args);
    };
    return () => {
      (obj as Record<K, unknown>)[name] = original;
    };
  }

  const sendFails = async (app: TestApp) => {
    const r = await app.rpc("chat.send", { sessionKey: "agent:main:f", message: "hi", timeoutSeconds: 10 });
    return r.ok ? r.result.status : r.error?.code;
  };
  const inboundFails = async (app: TestApp) => {
    const r = await app.app.router.handle(memoryInbound({ text: "hi" })).catch(() => null);
    if (r?.runId) return (await app.app.services.pipeline.wait(r.runId, 10_000))?.status;
    return r === null ? "threw" : r.dropped;
  };

  const cases: Array<{
    name: string;
    inject: (app: TestApp) => () => void;
    turn: (app: TestApp) => Promise<unknown>;
    outcome: unknown;
  }> = [
    {
      name: "the runtime's inbound append throws (chat.send)",
      inject: (app) =>
        failing(app.app.services.store.transcripts, "append", (_ref: unknown, m: { id: string }) =>
          m.id.endsWith(":in"),
        ),
      turn: sendFails,
      outcome: "error",
    },
    {
      name: "the runtime's set-up throws (an inbound message)",
      inject: (app) => failing(app.app.services.models, "contextTokens", () => true),
      turn: inboundFails,
      outcome: "error",
    },
    {
      name: "the turn's chat cannot be opened, before the runtime (an inbound message)",
      inject: (app) => failing(app.app.services.delivery, "openStream", () => true),
      turn: inboundFails,
      outcome: "error",
    },
    {
      name: "chat.send's submit throws",
      inject: (app) => failing(app.app.services.pipeline, "submitTurn", () => true),
      turn: sendFails,
      outcome: "INTERNAL",
    },
    {
      name: "the router's submit throws",
      inject: (app) => failing(app.app.services.pipeline, "submitTurn", () => true),
      turn: inboundFails,
      outcome: "threw",
    },
  ];

  for (const c of cases) {
    it(`${c.name}: the next turn is admitted right away`, async () => {
      const app = await start();
      (app.app.services.channels as AdapterRegistry).add(new MemoryChannel("memory", "default"));
      try {
        const before = fake.chatRequests().length;
        const restore = c.inject(app);
        try {
          expect(await c.turn(app)).toBe(c.outcome);
        } finally {
          restore();
        }
        expect(fake.chatRequests().length).toBe(before); // the failed turn made no model call
        expect(await probe(app)).toBe("ok");
      } finally {
        await app.stop();
      }
    });
  }
});

describe("a turn's holds go back after its reply is out", () => {
  it("the reply is delivered before the release is asked for (a Redis round trip never delays it)", async () => {
    const app = await startTestApp({
      models: pricedModels(),
      usage: { budgets: [{ scope: "agent:main", period: "day", maxCostUsd: 0.5 }] },
    });
    const channel = new MemoryChannel("memory", "default");
    (app.app.services.channels as AdapterRegistry).add(channel);
    const usage = app.app.services.usage as NonNullable<typeof app.app.services.usage>;
    const release = usage.release.bind(usage);
    const sentAtRelease: number[] = [];
    usage.release = (runIds) => {
      sentAtRelease.push(channel.sent.length);
      return release(runIds);
    };
    try {
      fake.setDefault(() => ({ text: "the reply", usage: { prompt: 1, completion: 1 } }));
      const r = await app.app.router.handle(memoryInbound({ text: "hi" }));
      expect((await app.app.services.pipeline.wait(r.runId as string, 10_000))?.status).toBe("ok");
      expect(channel.sent.map((m) => m.text)).toEqual(["the reply"]);
      expect(sentAtRelease).toEqual([1]); // asked once, the reply already sent
      expect(await probe(app)).toBe("ok"); // and given back all the same
    } finally {
      fake.setDefault(echoHandler);
      await app.stop();
    }
  });
});

/**
 * A platform's redelivery that gets past the inbound dedupe (its mark lost, or its lease expired)
 * is admitted again under the same run id (`turn:<runId>` held again); when that run has already
 * finished, the pipeline answers with its record and no turn will ever give the new hold back.
 */
function redeliveryStory(label: string, start: () => Promise<TestApp>) {
  it(`${label}: a redelivery of a message whose run has finished leaves no hold: the next turn is admitted at once`, async () => {
    const app = await start();
    (app.app.services.channels as AdapterRegistry).add(new MemoryChannel("memory", "default"));
    const outbox = app.app.services.store.outbox;
    const claim = outbox.claim.bind(outbox);
    try {
      fake.setDefault(() => ({ text: "ok", usage: { prompt: 1, completion: 1 } }));
      const msg = memoryInbound({ text: "hi" });
      const first = await app.app.router.handle(msg);
      expect(first.accepted).toBe(true);
      expect((await app.app.services.pipeline.wait(first.runId as string, 10_000))?.status).toBe("ok");
      const requests = fake.chatRequests().length;

      // the mark is lost: the same message is taken again, and resubmitted under the same run id
      outbox.claim = async () => true;
      const again = await app.app.router.handle(msg);
      outbox.claim = claim;
      expect(again).toMatchObject({ accepted: true, runId: first.runId });
      expect((await app.app.services.pipeline.wait(first.runId as string, 10_000))?.status).toBe("ok");
      expect(fake.chatRequests().length).toBe(requests); // not run again

      expect(await probe(app)).toBe("ok");
    } finally {
      outbox.claim = claim;
      fake.setDefault(echoHandler);
      await app.stop();
    }
  }, 30_000);
}

describe("an inbound redelivery past the dedupe (local queue)", () => {
  redeliveryStory("local", () =>
    startTestApp({
      models: pricedModels(),
      usage: { budgets: [{ scope: "agent:main", period: "day", maxCostUsd: 0.5 }] },
    }),
  );
});

describeRedis("an inbound redelivery past the dedupe (bullmq, Redis ledger)", () => {
  const prefix = randomPrefix("budgets-redeliver");
  afterAll(async () => dropPrefix(prefix));
  redeliveryStory("bullmq", () =>
    startTestApp({
      models: pricedModels(),
      usage: { budgets: [{ scope: "agent:main", period: "day", maxCostUsd: 0.5 }] },
      storage: { driver: "redis", redisUrl: REDIS_URL, prefix },
      queue: { driver: "bullmq", redisUrl: REDIS_URL, prefix },
    }),
  );
});

describeRedis("a process whose config no longer has a block budget (bullmq, Redis ledger)", () => {
  const prefix = randomPrefix("budgets-reload");
  afterAll(async () => dropPrefix(prefix));
  const shared = () => ({
    models: pricedModels(),
    storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
  });
  const block = { scope: "agent:main", period: "day" as const, maxCostUsd: 0.5 };
  const queue = (runTurns: boolean) => ({
    driver: "bullmq" as const,
    redisUrl: REDIS_URL,
    prefix,
    runTurns,
  });

  it("gives back the holds admitted under it: a failed turn's hold is gone when the budget is back", async () => {
    // a gateway still on the config with the block budget admits; a worker restarted on one
    // without it (a warn budget left) runs the turn, which fails before any model call
    const gateway = await startTestApp({ ...shared(), usage: { budgets: [block] }, queue: queue(false) });
    let worker = await startTestWorker({
      ...shared(),
      usage: { budgets: [{ ...block, action: "warn" }] },
      queue: queue(true),
    });
    try {
      const models = worker.app.services.models;
      const contextTokens = models.contextTokens.bind(models);
      models.contextTokens = () => {
        throw new Error("injected: the turn's set-up failed");
      };
      const before = fake.chatRequests().length;
      const failed = await gateway.rpc("chat.send", {
        sessionKey: "agent:main:f",
        message: "hi",
        timeoutSeconds: 10,
      });
      models.contextTokens = contextTokens;
      expect(failed.result?.status).toBe("error");
      expect(fake.chatRequests().length).toBe(before);
      // the budget is back on the worker too: the next turn is admitted (the hold did not lapse)
      await worker.stop();
      worker = await startTestWorker({ ...shared(), usage: { budgets: [block] }, queue: queue(true) });
      expect(await probe(gateway)).toBe("ok");
    } finally {
      await worker.stop();
      await gateway.stop();
    }
  }, 30_000);
});

describe("budgets across a restart (fs + local)", () => {
  it("a spent budget stays spent after the gateway restarts: the ledger starts from the stored counts", async () => {
    const dir = tempDir();
    const start = () =>
      startTestApp(
        {
          models: pricedModels(),
          usage: { budgets: [{ scope: "global", period: "month", maxCostUsd: 0.5 }] },
        },
        { dir: dir.dir },
      );
    let app = await start();
    try {
      // two turns at $0.30 each: the second is admitted at $0.30 < $0.50 and spends to $0.60
      await spendTurns(app, "r", 2);
      expect((await app.rpc("chat.send", { sessionKey: "agent:main:r2", message: "hi" })).error?.code).toBe(
        "BUDGET_EXCEEDED",
      );
      await app.stop();
      app = await start();
      const before = fake.chatRequests().length;
      const refused = await app.rpc("chat.send", {
        sessionKey: "agent:main:r3",
        message: "hi",
        timeoutSeconds: 10,
      });
      expect(refused.ok).toBe(false);
      expect(refused.error?.code).toBe("BUDGET_EXCEEDED");
      expect(refused.error?.message).toMatch(/global per month/);
      expect(fake.chatRequests().length).toBe(before);
      const usage = await app.rpc("usage.get", { scope: "global", period: "month" });
      expect(usage.result.budget.spent.costUsd).toBeCloseTo(0.6, 6);
    } finally {
      await app.stop();
      dir.cleanup();
    }
  });
});

describe("a compaction's spend (fs + local)", () => {
  it("is in the usage counts as in the budgets, under the session's agent, channel and model, and survives a restart", async () => {
    const dir = tempDir();
    const start = async () => {
      const app = await startTestApp(
        {
          models: pricedModels(),
          usage: { budgets: [{ scope: "global", period: "month", maxCostUsd: 100, action: "warn" }] },
        },
        { dir: dir.dir },
      );
      (app.app.services.channels as AdapterRegistry).add(new MemoryChannel("memory", "default"));
      return app;
    };
    // a turn's call: 300 tokens ($0.30); the summary's: 600 tokens ($0.60)
    fake.setDefault((r) =>
      contentText(r.body.messages?.[0]?.content).startsWith("You compact a chat transcript")
        ? { text: "SUMMARY", usage: { prompt: 500, completion: 100 } }
        : { text: "ok", usage: { prompt: 200, completion: 100 } },
    );
    let app = await start();
    try {
      const say = async (text: string, messageId: string) => {
        const r = await app.app.router.handle(memoryInbound({ text, messageId }));
        await app.app.services.pipeline.wait(r.runId ?? `compact:memory:default:${messageId}`, 10_000);
      };
      for (const i of [1, 2, 3, 4, 5]) await say(`turn ${i}`, `cs${i}`);
      const requests = fake.chatRequests().length;
      await say("/compact", "cs6");
      expect(fake.chatRequests().length).toBe(requests + 1);
      expect((await app.app.services.store.sessions.get("agent:main:main"))?.compactionCount).toBe(1);

      const usage = async (scope: string) =>
        (await app.rpc("usage.get", { scope, period: "month" })).result as {
          costUsd: number;
          tokens: { input: number; output: number };
          runs: number;
          budget?: { spent: { costUsd: number; tokens: number } };
        };
      const global = await usage("global");
      expect(global.costUsd).toBeCloseTo(5 * 0.3 + 0.6, 6);
      expect(global.tokens).toEqual({ input: 5 * 200 + 500, output: 5 * 100 + 100 });
      expect(global.runs).toBe(5); // the turns; a compaction is no run of its own
      // usage.get and budget.spent agree
      expect(global.budget?.spent.costUsd).toBeCloseTo(global.costUsd, 6);
      expect(global.budget?.spent.tokens).toBe(global.tokens.input + global.tokens.output);
      // the same dimensions as the turns' calls
      for (const scope of ["agent:main", "session:agent:main:main", "channel:memory", "model:oa/m"])
        expect((await usage(scope)).costUsd, scope).toBeCloseTo(2.1, 6);

      await app.stop();
      app = await start();
      const after = await usage("global");
      expect(after.costUsd).toBeCloseTo(2.1, 6);
      expect(after.budget?.spent.costUsd).toBeCloseTo(2.1, 6);
    } finally {
      fake.setDefault(echoHandler);
      await app.stop();
      dir.cleanup();
    }
  });
});

describe("budget config is checked at start", () => {
  it("a scope that matches nothing, an absurd price, a budget without a limit name their paths", () => {
    expect(() => parseConfig({ usage: { budgets: [{ scope: "agent:ghost", maxCostUsd: 1 }] } })).toThrow(
      /usage\.budgets\.0\.scope: matches nothing: agent "ghost"/,
    );
    expect(() => parseConfig({ usage: { budgets: [{ scope: "channel:telegram", maxCostUsd: 1 }] } })).toThrow(
      /usage\.budgets\.0\.scope: matches nothing: channel "telegram"/,
    );
    expect(() => parseConfig({ usage: { budgets: [{ scope: "global" }] } })).toThrow(/usage\.budgets\.0/);
    expect(() =>
      parseConfig({
        models: { providers: { oa: { kind: "openai", models: { m: { price: { inputPerMTok: 50_000 } } } } } },
      }),
    ).toThrow(
      /models\.providers\.oa\.models\.m\.price\.inputPerMTok: 50000 USD per million tokens is not a plausible/,
    );
    expect(() =>
      parseConfig({
        models: { providers: { oa: { kind: "openai", models: { m: { price: { inputPerMTok: -1 } } } } } },
      }),
    ).toThrow(/price\.inputPerMTok/);
  });
});
