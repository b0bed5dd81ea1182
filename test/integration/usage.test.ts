import { afterEach, describe, expect, it } from "vitest";
import type { InboundMessage } from "../../src/channels/types.js";
import type { ConfigInput } from "../../src/config/index.js";
import { type BudgetNotice, Budgets } from "../../src/usage/budgets.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { memoryInbound, startTestApp, type TestApp } from "../harness.js";
import { eventually, tempDir } from "../helpers.js";

/** usage.get / usage.list over RPC, and budgets on inbound channel messages (API.md §8.4). */

let t: TestApp | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

const MODELS: Partial<ConfigInput> = {
  models: {
    default: "s/echo",
    providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "re: $1" }] } },
  },
};

async function setup(budgets: unknown[] = []): Promise<{ app: TestApp; ch: MemoryChannel }> {
  const app = await startTestApp({ ...MODELS, usage: { budgets } } as Partial<ConfigInput>);
  t = app;
  const ch = new MemoryChannel("memory", "default");
  (app.app.services.channels as unknown as { add(a: MemoryChannel): void }).add(ch);
  return { app, ch };
}

const msg = (text: string) => memoryInbound({ text });

async function handleAndWait(app: TestApp, m: InboundMessage) {
  const r = await app.app.router.handle(m);
  if (r.runId) await app.app.services.pipeline.wait(r.runId, 10_000);
  return r;
}

describe("usage.get / usage.list", () => {
  it("count finished turns per scope and period, by agent, session, channel and model", async () => {
    const { app } = await setup([
      { scope: "agent:main", period: "day", maxTokens: 1_000_000, action: "warn" },
    ]);
    for (const key of ["agent:main:a", "agent:main:a", "agent:main:b"]) {
      const r = await app.rpc("chat.send", { sessionKey: key, message: "hello there", timeoutSeconds: 10 });
      expect(r.result.status).toBe("ok");
    }
    await handleAndWait(app, msg("from the chat"));

    const all = await app.rpc("usage.get", { scope: "global", period: "day" });
    expect(all.ok).toBe(true);
    expect(all.result.runs).toBe(4);
    expect(all.result.tokens.input).toBeGreaterThan(0);
    expect(all.result.tokens.output).toBeGreaterThan(0);
    expect(all.result.costUsd).toBe(0); // the scripted model has no price
    expect(all.result.budget).toBeUndefined();

    const month = await app.rpc("usage.get", { scope: "global", period: "month" });
    expect(month.result.runs).toBe(4);
    const a = await app.rpc("usage.get", { scope: "session:agent:main:a", period: "day" });
    expect(a.result.runs).toBe(2);
    const agent = await app.rpc("usage.get", { scope: "agent:main", period: "day" });
    expect(agent.result.runs).toBe(4);
    // the budget configured for exactly this scope and period comes with it
    expect(agent.result.budget).toMatchObject({ scope: "agent:main", period: "day", maxTokens: 1_000_000 });
    expect(agent.result.budget.spent.tokens).toBe(agent.result.tokens.input + agent.result.tokens.output);
    expect(agent.result.budget.resetsAt).toMatch(/T00:00:00\.000Z$/);
    const nobody = await app.rpc("usage.get", { scope: "agent:ghost", period: "day" });
    expect(nobody.result).toEqual({ costUsd: 0, tokens: { input: 0, output: 0 }, runs: 0 });

    const bySession = await app.rpc("usage.list", { period: "day", by: "session" });
    const rows = bySession.result.rows as Array<{ key: string; session: string; runs: number }>;
    expect(rows.map((r) => [r.session, r.runs]).sort()).toEqual(
      [
        ["agent:main:a", 2],
        ["agent:main:b", 1],
        ["agent:main:main", 1],
      ].sort(),
    );
    const byModel = await app.rpc("usage.list", { period: "month", by: "model" });
    expect(byModel.result.rows).toMatchObject([{ model: "s/echo", key: "s/echo", runs: 4 }]);
    const byChannel = await app.rpc("usage.list", { period: "day", by: "channel" });
    expect(byChannel.result.rows.map((r: { channel: string }) => r.channel)).toContain("memory");
    const byAgent = await app.rpc("usage.list", { period: "day", by: "agent" });
    expect(byAgent.result.rows).toMatchObject([{ agent: "main", runs: 4 }]);
  });

  it("counts survive a gateway restart; usage.list { days } gives rows per day with the budgets", async () => {
    const dir = tempDir();
    let clock = Date.UTC(2026, 11, 5, 12);
    const budgets = [{ scope: "agent:main", period: "day", maxCostUsd: 5 }];
    const start = () =>
      startTestApp({ ...MODELS, usage: { budgets } } as Partial<ConfigInput>, {
        dir: dir.dir,
        now: () => clock,
      });
    try {
      t = await start();
      for (const key of ["agent:main:a", "agent:main:b"]) {
        const r = await t.rpc("chat.send", { sessionKey: key, message: "yesterday", timeoutSeconds: 10 });
        expect(r.result.status).toBe("ok");
      }
      await t.stop();
      clock += 86_400_000;
      t = await start();
      expect((await t.rpc("usage.get", { scope: "global", period: "day" })).result.runs).toBe(0);
      const r = await t.rpc("chat.send", {
        sessionKey: "agent:main:a",
        message: "today",
        timeoutSeconds: 10,
      });
      expect(r.result.status).toBe("ok");
      expect((await t.rpc("usage.get", { scope: "global", period: "month" })).result.runs).toBe(3);
      expect((await t.rpc("usage.get", { scope: "session:agent:main:a", period: "month" })).result.runs).toBe(
        2,
      );
      const daily = await t.rpc("usage.list", { by: "agent", days: 7 });
      expect(daily.ok).toBe(true);
      expect(daily.result).toMatchObject({
        period: "day",
        by: "agent",
        days: 7,
        from: "2026-11-30",
        to: "2026-12-06",
      });
      expect(
        daily.result.rows.map((x: { day: string; agent: string; runs: number }) => [x.day, x.agent, x.runs]),
      ).toEqual([
        ["2026-12-05", "main", 2],
        ["2026-12-06", "main", 1],
      ]);
      expect(daily.result.rows[0].tokens.input).toBeGreaterThan(0);
      expect(daily.result.budgets).toEqual([
        { scope: "agent:main", period: "day", maxCostUsd: 5, maxTokens: null, warnAt: 0.8, action: "block" },
      ]);
      // without days the answer is as before: this period only, no day field
      const today = await t.rpc("usage.list", { by: "agent" });
      expect(today.result).toEqual({
        period: "day",
        by: "agent",
        rows: [{ agent: "main", key: "main", costUsd: 0, tokens: expect.any(Object), runs: 1 }],
      });
    } finally {
      await t?.stop();
      t = undefined;
      dir.cleanup();
    }
  });

  it("bad params are INVALID_PARAMS naming the field", async () => {
    const { app } = await setup();
    const by = await app.rpc("usage.list", { period: "day", by: "planet" });
    expect(by.error?.code).toBe("INVALID_PARAMS");
    expect(by.error?.message).toMatch(/params\.by/);
    const period = await app.rpc("usage.get", { scope: "global", period: "week" });
    expect(period.error?.code).toBe("INVALID_PARAMS");
    expect(period.error?.message).toMatch(/params\.period/);
    for (const days of [0, 401, 1.5, "7"]) {
      const bad = await app.rpc("usage.list", { by: "agent", days });
      expect(bad.error?.code).toBe("INVALID_PARAMS");
      expect(bad.error?.message).toMatch(/params\.days/);
    }
    const monthDays = await app.rpc("usage.list", { period: "month", by: "agent", days: 3 });
    expect(monthDays.error?.code).toBe("INVALID_PARAMS");
    expect(monthDays.error?.message).toMatch(/params\.days: goes with period "day"/);
    const scope = await app.rpc("usage.get", { scope: "planet:mars", period: "day" });
    expect(scope.error?.code).toBe("INVALID_PARAMS");
    expect(scope.error?.message).toMatch(/params\.scope/);
  });
});

describe("budgets on inbound channel messages", () => {
  it("a spent block budget refuses the turn with one line naming the budget and its reset; warnAt tells the chat once", async () => {
    const { app, ch } = await setup([{ scope: "agent:main", period: "day", maxTokens: 6, warnAt: 0.5 }]);
    const first = await handleAndWait(app, msg("hello there, how are you"));
    expect(first.accepted).toBe(true);
    // the first turn spent more than half the budget: one notice to the chat
    await eventually(() =>
      expect(ch.sent.some((s) => /^Budget agent:main per day has reached 50%/.test(s.text))).toBe(true),
    );
    const runsBefore = (await app.app.services.store.runs.listBySession(first.sessionKey as string, 10))
      .length;

    const again = msg("again");
    const refused = await app.app.router.handle(again);
    expect(refused).toMatchObject({ accepted: false, dropped: "budget" });
    expect(refused.runId).toBeUndefined();
    const line = ch.sent.at(-1);
    expect(line?.to).toBe("u1");
    expect(line?.text).toMatch(
      /^Not answered: budget agent:main per day is spent \(\d+ of 6 tokens\); it resets at \d{4}-\d{2}-\d{2}T00:00:00\.000Z\.$/,
    );
    // no turn was run for it
    expect((await app.app.services.store.runs.listBySession(first.sessionKey as string, 10)).length).toBe(
      runsBefore,
    );
    // a redelivery of the same platform message is not told twice
    const sentCount = ch.sent.length;
    await app.app.router.handle(again);
    expect(ch.sent.length).toBe(sentCount);
    expect(ch.sent.filter((s) => s.text.startsWith("Budget ")).length).toBe(1);
  });

  it("a warn budget never refuses, and its notice goes out once per period", async () => {
    const { app, ch } = await setup([
      { scope: "global", period: "month", maxTokens: 4, warnAt: 0.8, action: "warn" },
    ]);
    for (let i = 0; i < 3; i++)
      expect((await handleAndWait(app, msg(`turn ${i} with some words`))).accepted).toBe(true);
    await eventually(() =>
      expect(ch.sent.filter((s) => s.text.startsWith("Budget global per month")).length).toBe(1),
    );
    expect(ch.sent.filter((s) => s.text.startsWith("re: ")).length).toBe(3);
  });
});

describe("Budgets notices", () => {
  it("one notice per budget and period (a new period warns again), with an idempotency key naming both", async () => {
    let clock = Date.UTC(2026, 11, 6, 12);
    const notices: BudgetNotice[] = [];
    const b = new Budgets(
      [{ scope: "global", period: "day", maxCostUsd: 1, maxTokens: null, warnAt: 0.5, action: "block" }],
      { now: () => clock, notify: (n) => notices.push(n) },
    );
    const ctx = { agentId: "main", sessionKey: "agent:main:x" };
    let i = 0;
    // a model call: reserved, then settled at its real cost; the finished turn counted
    const call = async (cost: number) => {
      const ticket = await b.reserve(ctx, { runId: "r", index: i++, chain: [], promptTokens: 10 });
      await b.settle(ticket, { costUsd: cost, tokens: 2 });
      b.record(ctx, { cost, input: 1, output: 1 });
    };
    await call(0.4);
    expect(notices).toHaveLength(0);
    await call(0.2);
    await call(0.2);
    expect(notices).toHaveLength(1);
    expect(notices[0]?.key).toBe("budget-warn:0:global:day:2026-12-06");
    expect(notices[0]?.text).toMatch(
      /reached 50% \(\$0\.6000 of \$1\); it resets at 2026-12-07T00:00:00\.000Z/,
    );
    clock = Date.UTC(2026, 11, 7, 1);
    await call(0.7);
    expect(notices.map((n) => n.key)).toEqual([
      "budget-warn:0:global:day:2026-12-06",
      "budget-warn:0:global:day:2026-12-07",
    ]);
    // the day's counts start again; the month's go on
    expect((await b.get("global", "day")).runs).toBe(1);
    expect((await b.get("global", "month")).runs).toBe(4);
  });
});
