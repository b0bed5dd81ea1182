import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  clampPingPongTurns,
  discoverConfigFile,
  loadConfig,
  parseConfig,
} from "../../../src/config/index.js";
import { SwitchboardError } from "../../../src/errors.js";
import { tempDir } from "../../helpers.js";

const dirs: Array<() => void> = [];
function dir(): string {
  const t = tempDir();
  dirs.push(t.cleanup);
  return t.dir;
}
afterEach(() => {
  for (const c of dirs.splice(0)) c();
});

function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SwitchboardError);
    expect((err as SwitchboardError).code).toBe("CONFIG");
    return (err as Error).message;
  }
  throw new Error("expected a config error");
}

describe("config defaults", () => {
  it("an empty config gives the embedded defaults of API.md §3", () => {
    const c = parseConfig({});
    expect(c.gateway).toMatchObject({ host: "127.0.0.1", port: 18790 });
    expect(c.stateDir).toBe("./.switchboard");
    expect(c.storage.driver).toBe("fs");
    expect(c.queue).toMatchObject({ driver: "local", concurrency: 8 });
    expect(c.session).toMatchObject({
      scope: "per-sender",
      dmScope: "main",
      agentToAgent: { maxPingPongTurns: 5 },
    });
    expect(c.tools).toMatchObject({ profile: "coding", sessions: { visibility: "tree" } });
    expect(c.agents.defaults.subagents).toEqual({
      archiveAfterMinutes: 60,
      runTimeoutSeconds: 0,
      maxSpawnDepth: 1,
      maxChildren: 5,
    });
    expect(c.agents.list.map((a) => a.id)).toEqual(["main"]);
    expect(c.channels.webchat.enabled).toBe(true);
  });

  it("accepts decimal durations", () => {
    const c = parseConfig({ agents: { defaults: { subagents: { archiveAfterMinutes: 0.05 } } } });
    expect(c.agents.defaults.subagents.archiveAfterMinutes).toBe(0.05);
  });
});

describe("config validation names the path", () => {
  it("out-of-range maxPingPongTurns", () => {
    const msg = configError(() => parseConfig({ session: { agentToAgent: { maxPingPongTurns: 21 } } }));
    expect(msg).toContain("config: session.agentToAgent.maxPingPongTurns: must be between 0 and 20");
    expect(configError(() => parseConfig({ session: { agentToAgent: { maxPingPongTurns: -1 } } }))).toContain(
      "session.agentToAgent.maxPingPongTurns",
    );
  });
  it.each([0, 9, 20])("maxPingPongTurns %i is accepted (0..20)", (n) => {
    expect(parseConfig({ session: { agentToAgent: { maxPingPongTurns: n } } }).session.agentToAgent).toEqual({
      maxPingPongTurns: n,
    });
  });
  it("threadBindings.defaultSpawnContext: fork by default, isolated settable, per channel too", () => {
    expect(parseConfig({}).session.threadBindings.defaultSpawnContext).toBe("fork");
    const c = parseConfig({
      session: { threadBindings: { defaultSpawnContext: "isolated" } },
      channels: { slack: { accounts: {}, threadBindings: { defaultSpawnContext: "fork" } } },
    });
    expect(c.session.threadBindings.defaultSpawnContext).toBe("isolated");
    expect(c.channels.slack?.threadBindings?.defaultSpawnContext).toBe("fork");
    expect(
      configError(() => parseConfig({ session: { threadBindings: { defaultSpawnContext: "clone" } } })),
    ).toContain("session.threadBindings.defaultSpawnContext");
  });
  it("floors decimal ping-pong turns, and the runtime clamp handles odd values", () => {
    expect(
      parseConfig({ session: { agentToAgent: { maxPingPongTurns: 2.7 } } }).session.agentToAgent
        .maxPingPongTurns,
    ).toBe(2);
    expect(clampPingPongTurns("x")).toBe(5);
    expect(clampPingPongTurns(-3)).toBe(0);
    expect(clampPingPongTurns(99)).toBe(20);
    expect(clampPingPongTurns(12)).toBe(12);
    expect(clampPingPongTurns(3.9)).toBe(3);
  });
  it("unknown top-level keys are errors", () => {
    expect(configError(() => parseConfig({ gatway: {} }))).toMatch(/Unrecognized key.*gatway/);
  });
  it("an unknown key is named by its own path, one line per key", () => {
    const msg = configError(() =>
      parseConfig({ gateway: { prot: 1 }, session: { agentToAgent: { maxTurns: 3, other: 1 } } }),
    );
    expect(msg.split("\n")).toEqual([
      'config: gateway.prot: Unrecognized key "prot"',
      'config: session.agentToAgent.maxTurns: Unrecognized key "maxTurns"',
      'config: session.agentToAgent.other: Unrecognized key "other"',
    ]);
  });
  it("wrong types deep inside", () => {
    expect(configError(() => parseConfig({ gateway: { port: "x" } }))).toContain("config: gateway.port:");
    expect(configError(() => parseConfig({ queue: { driver: "rabbit" } }))).toContain(
      "config: queue.driver:",
    );
    expect(configError(() => parseConfig({ agents: { list: [{ id: "Bad Id!" }] } }))).toContain(
      "config: agents.list.0.id:",
    );
  });
  it("duplicate agents and bindings to unknown agents", () => {
    expect(configError(() => parseConfig({ agents: { list: [{ id: "a" }, { id: "a" }] } }))).toContain(
      "agents.list.1.id",
    );
    expect(
      configError(() => parseConfig({ bindings: [{ agentId: "nope", match: { channel: "telegram" } }] })),
    ).toContain("bindings.0.agentId");
  });
});

describe("env substitution", () => {
  it("replaces ${VAR} in strings", () => {
    const c = parseConfig(
      { gateway: { auth: { token: "${TOK}" } }, stateDir: "/x/${NAME}/y" },
      { TOK: "sekret-123456", NAME: "n" },
    );
    expect(c.gateway.auth.token).toBe("sekret-123456");
    expect(c.stateDir).toBe("/x/n/y");
  });
  it("a missing variable is an error naming the path and the variable", () => {
    const msg = configError(() =>
      parseConfig({ models: { providers: { o: { kind: "openai", apiKey: "${NOPE_KEY}" } } } }, {}),
    );
    expect(msg).toContain("models.providers.o.apiKey");
    expect(msg).toContain("NOPE_KEY");
  });
});

describe("discovery", () => {
  it("--config, then $SWITCHBOARD_CONFIG, then ./switchboard.json5, then defaults", () => {
    const d = dir();
    expect(discoverConfigFile({ cwd: d, env: {} })).toBeNull();
    writeFileSync(path.join(d, "switchboard.json5"), "{ // comment\n stateDir: 'local', }\n");
    expect(discoverConfigFile({ cwd: d, env: {} })).toBe(path.join(d, "switchboard.json5"));
    writeFileSync(path.join(d, "env.json5"), "{ stateDir: 'fromenv' }");
    expect(discoverConfigFile({ cwd: d, env: { SWITCHBOARD_CONFIG: "env.json5" } })).toBe(
      path.join(d, "env.json5"),
    );
    expect(discoverConfigFile({ cwd: d, env: { SWITCHBOARD_CONFIG: "env.json5" }, file: "x.json5" })).toBe(
      path.join(d, "x.json5"),
    );
    const loaded = loadConfig({ cwd: d, env: {} });
    expect(loaded.config.stateDir).toBe("local");
    expect(loaded.source).toBe(path.join(d, "switchboard.json5"));
  });
  it("invalid JSON5 and missing files are config errors naming the file", () => {
    const d = dir();
    writeFileSync(path.join(d, "bad.json5"), "{ nope: ");
    expect(configError(() => loadConfig({ cwd: d, file: "bad.json5", env: {} }))).toContain("bad.json5");
    expect(configError(() => loadConfig({ cwd: d, file: "missing.json5", env: {} }))).toContain(
      "missing.json5",
    );
  });
});

describe("cron jobs in the config file", () => {
  it("API.md §7's example job loads (deleteAfterRun on a cron schedule is accepted; it acts on `at` jobs only)", () => {
    const config = parseConfig({
      models: {
        default: "openai/gpt-4.1",
        providers: { openai: { kind: "openai", baseUrl: "http://127.0.0.1:9/v1", apiKey: "x" } },
      },
      cron: {
        enabled: true,
        sessionRetention: "24h",
        jobs: [
          {
            id: "morning",
            agentId: "main",
            enabled: true,
            schedule: { cron: "0 7 * * *", tz: "Europe/Berlin" },
            message: "Summarise my day",
            model: "openai/gpt-4.1-mini",
            session: "persistent",
            delivery: {
              mode: "announce",
              channel: "telegram",
              to: "123456",
              accountId: "default",
              threadId: "9",
            },
            catchUp: "once",
            deleteAfterRun: true,
          },
        ],
      },
    });
    expect(config.cron.jobs[0]).toMatchObject({ id: "morning", deleteAfterRun: true, catchUp: "once" });
  });
});
