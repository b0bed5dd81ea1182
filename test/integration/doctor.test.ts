import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkRedis, checkStateDirPermissions, doctorChecks } from "../../src/cli/doctor.js";
import { main } from "../../src/cli/main.js";
import { FakeSlack } from "../fakes/slack.js";
import { FakeTelegram } from "../fakes/telegram.js";
import { startTestApp } from "../harness.js";
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

  it("a failed check is an error: on stderr, with a non-zero exit code (API.md §2)", async () => {
    const file = configFile({ session: { agentToAgent: { maxPingPongTurns: 42 } } });
    for (const json of [false, true]) {
      let out = "";
      let err = "";
      const code = await main(["doctor", "--config", file, ...(json ? ["--json"] : [])], {
        out: (s) => (out += `${s}\n`),
        err: (s) => (err += `${s}\n`),
      });
      expect(code).toBe(1);
      expect(err).toContain("config: session.agentToAgent.maxPingPongTurns: must be between 0 and 20");
      if (json) expect(JSON.parse(out).checks[0]).toMatchObject({ name: "config", status: "fail" });
      else {
        expect(out).toContain(
          "FAIL  config: session.agentToAgent.maxPingPongTurns: must be between 0 and 20",
        );
        expect(out).not.toContain("config: config:");
      }
    }
    let err = "";
    const ok = await main(["doctor", "--config", configFile({})], { out: () => {}, err: (s) => (err += s) });
    expect(ok).toBe(0);
    expect(err).toBe("");
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
    // the persistence mode it found, appendfsync included
    expect(checks.find((c) => c.name === "redis.persistence")?.message).toMatch(
      /appendonly \S+, appendfsync \S+/,
    );
  });

  it("every file a running gateway writes is 0600 and every folder 0700", async () => {
    const t = await startTestApp();
    try {
      const r = await t.rpc("chat.send", { sessionKey: "main", message: "help", timeoutSeconds: 20 });
      expect(r.result.status).toBe("ok");
      await t.invoke("agent:main:main", "sessions_spawn", { task: "say hi" });
      const check = checkStateDirPermissions(t.dir);
      expect(check.message).toContain("private");
      expect(check.status).toBe("ok");
    } finally {
      await t.stop();
    }
  });

  it("checks every path under the state dir and names the ones others can read", async () => {
    const file = configFile({});
    const state = path.join(path.dirname(file), "state");
    mkdirSync(path.join(state, "queue"), { recursive: true, mode: 0o700 });
    chmodSync(state, 0o700);
    writeFileSync(path.join(state, "queue", "journal.jsonl"), "{}\n", { mode: 0o600 });
    const ok = (await doctorChecks(file)).find((c) => c.name === "stateDir.permissions");
    expect(ok).toMatchObject({ status: "ok" });
    chmodSync(path.join(state, "queue"), 0o755);
    chmodSync(path.join(state, "queue", "journal.jsonl"), 0o644);
    const bad = (await doctorChecks(file)).find((c) => c.name === "stateDir.permissions");
    expect(bad?.status).toBe("warn");
    expect(bad?.message).toContain(`${path.join(state, "queue")} (dir, mode 755; expected 700)`);
    expect(bad?.message).toContain(
      `${path.join(state, "queue", "journal.jsonl")} (file, mode 644; expected 600)`,
    );
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

describe("switchboard doctor: DM access", () => {
  it("warns when dmPolicy open meets dmScope main, and lists pairing approvals from the store", async () => {
    const file = configFile({
      channels: {
        telegram: { accounts: { main: { token: tg.token, apiRoot: tg.apiRoot } }, dmPolicy: "open" },
        slack: {
          accounts: {
            work: { botToken: slack.botToken, signingSecret: "s", mode: "http", apiUrl: slack.apiUrl },
          },
        },
      },
    });
    const { loadConfig } = await import("../../src/config/load.js");
    const { openStore } = await import("../../src/app/index.js");
    const { PairingStore } = await import("../../src/routing/pairing.js");
    const { silentLogger } = await import("../../src/log.js");
    const local = await openStore(loadConfig({ file }), silentLogger());
    const pairing = new PairingStore(local.store.kv, Date.now);
    const req = await pairing.request("slack", "work", "U42");
    await pairing.approve("slack", req?.request.code ?? "");
    await local.close();

    const checks = await doctorChecks(file);
    expect(checks.find((c) => c.name === "telegram.dmPolicy")).toMatchObject({ status: "warn" });
    expect(checks.find((c) => c.name === "telegram.dmPolicy")?.message).toContain("main session");
    expect(checks.find((c) => c.name === "slack.dmPolicy")).toMatchObject({ status: "ok" });
    expect(checks.find((c) => c.name === "slack.dmPolicy")?.message).toContain("dmPolicy pairing");
    expect(checks.find((c) => c.name === "pairing")?.message).toContain("slack:U42");
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
