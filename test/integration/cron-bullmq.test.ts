import type { Redis } from "ioredis";
import { Redis as IORedis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { BullmqCronDriver } from "../../src/cron/bullmq.js";
import { silentLogger } from "../../src/log.js";
import { hashTag } from "../../src/pipeline/bullmq/keys.js";
import type { CronJob, Tick } from "../../src/services/cron.js";
import { startTestApp } from "../harness.js";
import { eventually, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, newRedisClient, unlinkMatching } from "../redis.js";

/**
 * BullMQ job schedulers on real Redis: several "gateways/workers" upsert the same schedules and
 * all run workers, and every tick is handled exactly once.
 */

const job = (over: Partial<CronJob> & Pick<CronJob, "id" | "schedule">): CronJob => ({
  agentId: "main",
  enabled: true,
  message: "tick",
  session: "persistent",
  delivery: { mode: "none" },
  catchUp: "once",
  ...over,
});

describeRedis("cron on BullMQ job schedulers", () => {
  let redis: Redis;
  const prefix = randomPrefix("cron");
  const appPrefix = randomPrefix("cronapp");
  const tag = hashTag(`${prefix}:queue`);
  const blocking: Redis[] = [];
  const drivers: BullmqCronDriver[] = [];

  beforeAll(() => {
    redis = newRedisClient();
  });
  afterAll(async () => {
    for (const d of drivers) await d.stop();
    for (const b of blocking) b.disconnect();
    await unlinkMatching(redis, `${tag}:*`);
    await unlinkMatching(redis, `*${appPrefix}*`);
    await redis.quit();
  });

  const driver = () => {
    const d = new BullmqCronDriver({
      connection: redis,
      createBlockingConnection: () => {
        const c = new IORedis(REDIS_URL, { maxRetriesPerRequest: null });
        blocking.push(c);
        return c;
      },
      prefix: tag,
      logger: silentLogger(),
    });
    drivers.push(d);
    return d;
  };

  it("two workers: each tick of an every and of a cron schedule runs exactly once", async () => {
    const jobs = [
      job({ id: "sec", schedule: { every: "1s" } }),
      job({ id: "cronsec", schedule: { cron: "* * * * * *", tz: "Europe/Berlin" } }),
    ];
    const handled: Array<{ by: string; tick: Tick }> = [];
    const handler = (by: string) => async (tick: Tick) => {
      handled.push({ by, tick });
    };
    await driver().start(jobs, handler("a"));
    await driver().start(jobs, handler("b"));
    expect(await drivers[0]?.nextRunAt("sec")).toBeGreaterThan(Date.now() - 1000);
    await eventually(() => handled.filter((h) => h.tick.jobId === "sec").length >= 2, 400, 25);
    // A third process starting up upserts the same schedulers again.
    await driver().start(jobs, handler("c"));
    await eventually(() => handled.filter((h) => h.tick.jobId === "sec").length >= 5, 400, 25);
    await eventually(() => handled.filter((h) => h.tick.jobId === "cronsec").length >= 4, 400, 25);
    for (const id of ["sec", "cronsec"]) {
      const ticks = handled.filter((h) => h.tick.jobId === id).map((h) => h.tick.tickAt);
      expect(new Set(ticks).size).toBe(ticks.length); // no tick handled twice
      // Ticks are at least most of a second apart: a re-upsert did not add an extra one.
      const sorted = [...ticks].sort((x, y) => x - y);
      console.log(
        id,
        sorted,
        handled.filter((h) => h.tick.jobId === id).map((h) => h.by),
      );
      expect(sorted.slice(1).every((t, i) => t - (sorted[i] ?? 0) >= 900)).toBe(true);
    }
    const cronTicks = handled.filter((h) => h.tick.jobId === "cronsec").map((h) => h.tick.tickAt);
    expect(cronTicks.every((t) => t % 1000 === 0)).toBe(true); // cron ticks are the pattern's instants
    expect(handled.every((h) => h.tick.late === false)).toBe(true);
    // Removing the job on one process stops it everywhere.
    await drivers[1]?.remove("sec");
    expect(await drivers[0]?.nextRunAt("sec")).toBeNull();
  });

  it("a gateway on bullmq + redis storage runs a job through the whole flow", async () => {
    const t = await startTestApp({
      storage: { driver: "redis", redisUrl: REDIS_URL, prefix: appPrefix },
      queue: { driver: "bullmq", redisUrl: REDIS_URL, prefix: appPrefix },
      cron: { jobs: [{ id: "pulse", schedule: { every: "1s" }, message: "hello" }] },
    });
    try {
      const runs = await eventually(
        async () => {
          const r = (await t.rpc("cron.runs", { id: "pulse" })).result.runs;
          return r.some((x: { status: string }) => x.status === "ok") ? r : null;
        },
        400,
        25,
      );
      expect(runs[0].runId).toMatch(/^cron-pulse-\d+$/);
      const job = (await t.rpc("cron.list")).result.jobs[0];
      expect(job.nextRunAt).toBeGreaterThan(Date.now() - 5000);
      const rows = (await t.rpc("sessions.list", { kinds: ["cron"] })).result.sessions;
      expect(rows[0]).toMatchObject({ key: "cron:pulse", kind: "cron", channel: "internal" });
    } finally {
      await t.stop();
    }
  });

  it("two gateways on one Redis: every tick is one run, one transcript message", async () => {
    const prefix2 = `${appPrefix}-two`;
    const cfg = {
      storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix: prefix2 },
      queue: { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix: prefix2 },
      cron: { jobs: [{ id: "beat", schedule: { every: "1s" }, message: "hello" }] },
    };
    const a = await startTestApp(cfg);
    const b = await startTestApp(cfg);
    try {
      const runs = await eventually(
        async () => {
          const r = (await a.rpc("cron.runs", { id: "beat", limit: 50 })).result.runs;
          return r.filter((x: { status: string }) => x.status === "ok").length >= 4 ? r : null;
        },
        400,
        25,
      );
      const ids = runs.map((r: { runId: string }) => r.runId);
      expect(new Set(ids).size).toBe(ids.length);
      // One tick per second across both gateways: no extra tick from the second one's start.
      const ticks = ids
        .map((id: string) => Number(/-(\d+)$/.exec(id)?.[1]))
        .sort((x: number, y: number) => x - y);
      expect(ticks.slice(1).every((t: number, i: number) => t - (ticks[i] ?? 0) >= 900)).toBe(true);
      // Let in-flight runs finish, then compare the transcript with the run log.
      await Promise.all(ids.map((id: string) => a.app.services.pipeline.wait(id, 10_000)));
      const entry = await a.app.services.store.sessions.get("cron:beat");
      const msgs = await a.app.services.store.transcripts.readTail(
        { agentId: "main", sessionId: entry?.sessionId ?? "" },
        { limit: 500 },
      );
      const userRuns = msgs.filter((m) => m.role === "user").map((m) => m.runId);
      expect(new Set(userRuns).size).toBe(userRuns.length);
      for (const id of ids) expect(userRuns).toContain(id);
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});
