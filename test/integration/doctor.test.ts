import { writeFileSync } from "node:fs";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkRedis, doctorChecks } from "../../src/cli/doctor.js";
import { FakeSlack } from "../fakes/slack.js";
import { FakeTelegram } from "../fakes/telegram.js";
import { REDIS_URL, tempDir } from "../helpers.js";
import { describeRedis, ownRedis } from "../redis.js";

let tg: FakeTelegram;
let slack: FakeSlack;
const dirs: Array<() => void> = [];

function configFile(config: Record<string, unknown>): string {
  const t = tempDir();
  dirs.push(t.cleanup);
  const file = path.join(t.dir, "switchboard.json5");
  writeFileSync(file, JSON.stringify({ stateDir: path.join(t.dir, "state"), ...config }));
  return file;
}

beforeAll(async () => {
  tg = await FakeTelegram.start();
  slack = await FakeSlack.start();
});
afterAll(async () => {
  await tg.close();
  await slack.close();
  for (const c of dirs) c();
});

describe("switchboard doctor", () => {
  it("reports a config error with its path and stops there", async () => {
    const checks = await doctorChecks(configFile({ session: { dmScope: "sideways" } }));
    expect(checks).toHaveLength(1);
    expect(checks[0]).toMatchObject({ name: "config", status: "fail" });
    expect(checks[0]?.message).toContain("session.dmScope");
  });

  it("calls each channel's identity method and reports what it says", async () => {
    slack.failNext("auth.test", { error: "invalid_auth" });
    const checks = await doctorChecks(
      configFile({
        channels: {
          telegram: { accounts: { main: { token: tg.token, apiRoot: tg.apiRoot } } },
          slack: {
            accounts: {
              work: { botToken: slack.botToken, signingSecret: "s", mode: "http", apiUrl: slack.apiUrl },
            },
          },
        },
      }),
    );
    const tgCheck = checks.find((c) => c.name === "telegram:main" && c.message.includes("getMe"));
    expect(tgCheck).toMatchObject({ status: "ok" });
    expect(tgCheck?.message).toContain("@switchboard_test_bot");
    const slackCheck = checks.find((c) => c.name === "slack:work" && c.message.includes("auth.test"));
    expect(slackCheck?.status).toBe("fail");
    expect(slackCheck?.message).toContain("invalid_auth");
  });

  it("warns that the demo model answers when no model is configured", async () => {
    const checks = await doctorChecks(configFile({}));
    expect(checks.find((c) => c.name === "model")).toMatchObject({ status: "warn" });
    expect(checks.find((c) => c.name === "stateDir")?.status).toBe("ok");
  });
});

describeRedis("switchboard doctor with Redis", () => {
  it("checks reachability, version, maxmemory-policy and persistence", async () => {
    const checks = await doctorChecks(
      configFile({
        storage: { driver: "redis", redisUrl: REDIS_URL },
        queue: { driver: "bullmq", redisUrl: REDIS_URL },
      }),
    );
    const names = checks.map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(["redis", "redis.maxmemory-policy", "redis.persistence"]));
    expect(checks.find((c) => c.name === "redis")?.message).toMatch(/Redis \d+\./);
  });

  it("fails clearly on an unreachable Redis, naming the URL", async () => {
    const checks = await doctorChecks(
      configFile({
        storage: { driver: "redis", redisUrl: "redis://127.0.0.1:1" },
        queue: { driver: "bullmq", redisUrl: "redis://127.0.0.1:1" },
      }),
    );
    const r = checks.find((c) => c.name === "redis");
    expect(r?.status).toBe("fail");
    expect(r?.message).toContain("redis://127.0.0.1:1");
  });
});

describe("switchboard doctor: cron and hooks", () => {
  it("validates every schedule and delivery target", async () => {
    const bad = await doctorChecks(
      configFile({ cron: { jobs: [{ id: "j", schedule: { cron: "0 25 * * *" }, message: "x" }] } }),
    );
    expect(bad[0]).toMatchObject({ name: "config", status: "fail" });
    expect(bad[0]?.message).toContain("cron.jobs.0.schedule.cron");
    const checks = await doctorChecks(
      configFile({
        channels: { telegram: { accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } } } },
        hooks: { enabled: true, token: "hook-secret-0123456789" },
        cron: {
          jobs: [
            {
              id: "good",
              schedule: { cron: "0 7 * * *", tz: "Europe/Berlin" },
              message: "x",
              delivery: { mode: "announce", channel: "telegram", to: "1" },
            },
            {
              id: "nochan",
              schedule: { every: "1h" },
              message: "x",
              delivery: { mode: "announce", channel: "slack", to: "C1" },
            },
            {
              id: "noacct",
              schedule: { every: "1h" },
              message: "x",
              delivery: { mode: "announce", channel: "telegram", to: "1", accountId: "other" },
            },
            { id: "past", schedule: { at: "2020-01-01T00:00:00Z" }, message: "x" },
          ],
        },
      }),
    );
    const by = (n: string) => checks.find((c) => c.name === n);
    expect(by("cron:good")).toMatchObject({ status: "ok" });
    expect(by("cron:good")?.message).toMatch(/next run 20\d\d-\d\d-\d\dT(05|06):00:00/);
    expect(by("cron:nochan")).toMatchObject({ status: "fail" });
    expect(by("cron:nochan")?.message).toContain("delivery.channel: slack is not configured");
    expect(by("cron:noacct")?.message).toContain('no account "other"');
    expect(by("cron:past")).toMatchObject({ status: "warn" });
    expect(by("hooks")).toMatchObject({ status: "ok" });
  });
});

describeRedis("switchboard doctor: Redis durability", () => {
  it("is satisfied by appendfsync always and warns on everysec", async () => {
    const own = await ownRedis();
    try {
      const persistence = async () => (await checkRedis(own.url)).find((c) => c.name === "redis.persistence");
      expect(await persistence()).toMatchObject({
        status: "ok",
        message: "appendonly yes, appendfsync always",
      });
      const client = new Redis(own.url);
      await client.config("SET", "appendfsync", "everysec");
      client.disconnect();
      const warn = await persistence();
      expect(warn?.status).toBe("warn");
      expect(warn?.message).toContain("set appendfsync always");
    } finally {
      await own.cleanup();
    }
  });
});
