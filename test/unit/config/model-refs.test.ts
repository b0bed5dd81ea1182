import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { doctorChecks } from "../../../src/cli/doctor.js";
import { loadConfig, parseConfig } from "../../../src/config/load.js";
import { startTestApp } from "../../harness.js";
import { tempDir } from "../../helpers.js";

/** Issue 14, item 5: a model reference naming an unknown provider is a config error naming the path. */

const providers = { openai: { kind: "openai", apiKey: "sk-test" } };

function errorOf(raw: unknown): string {
  try {
    parseConfig(raw, {});
  } catch (err) {
    return (err as Error).message;
  }
  return "no error";
}

describe("model references", () => {
  it.each([
    [{ models: { default: "nope/model", providers } }, "models.default"],
    [{ models: { providers }, agents: { defaults: { model: "nope/m" } } }, "agents.defaults.model"],
    [
      { models: { providers }, agents: { list: [{ id: "main" }, { id: "b", model: "nope/m" }] } },
      "agents.list.1.model",
    ],
    [{ models: { providers, allowed: ["openai/*", "nope/*"] } }, "models.allowed.1"],
  ])("%j fails at %s", (raw, at) => {
    const msg = errorOf(raw);
    expect(msg).toContain(`config: ${at}: unknown model provider "nope"`);
    expect(msg).toContain("configured providers: openai");
  });

  it("with no providers at all the message says none are configured", () => {
    expect(errorOf({ models: { default: "nope/model" } })).toContain("configured providers: none");
  });

  it("references to configured providers pass", () => {
    const c = parseConfig(
      { models: { default: "openai/gpt-4.1-mini", providers, allowed: ["openai/*", "*/*"] } },
      {},
    );
    expect(c.models.default).toBe("openai/gpt-4.1-mini");
  });

  it("the default of API.md §3, scripted/demo, may be written out without declaring a provider", async () => {
    expect(parseConfig({ models: { default: "scripted/demo" } }, {}).models.default).toBe("scripted/demo");
    expect(
      parseConfig({ agents: { list: [{ id: "main", model: "scripted/demo" }] } }, {}).agents.list[0]?.model,
    ).toBe("scripted/demo");
    // A configured provider still wins, and other unknown providers are still errors.
    expect(errorOf({ models: { default: "scripted/demo", providers } })).toBe("no error");
    expect(errorOf({ models: { default: "nope/model", providers } })).toContain("models.default");
    const t = await startTestApp({
      models: { default: "scripted/demo" },
      agents: { list: [{ id: "main" }, { id: "research", model: "scripted/demo" }] },
    });
    try {
      for (const sessionKey of ["agent:main:main", "agent:research:main"]) {
        const r = await t.rpc("chat.send", { sessionKey, message: "hello there", timeoutSeconds: 10 });
        expect(r.result).toMatchObject({ status: "ok" });
        expect((r.result as { reply: string }).reply).toContain("hello there");
        // the scripted model always says it is scripted
        expect((r.result as { reply: string }).reply.toLowerCase()).toContain("scripted");
      }
      expect(t.app.services.models.isAllowed("scripted/demo")).toBe(true);
    } finally {
      await t.stop();
    }
  });

  it("doctor reports the same error as a failed config check", async () => {
    const t = tempDir();
    const file = path.join(t.dir, "c.json5");
    writeFileSync(
      file,
      JSON.stringify({ stateDir: path.join(t.dir, "s"), models: { default: "nope/model" } }),
    );
    const checks = await doctorChecks(file);
    const config = checks.find((c) => c.name === "config");
    expect(config?.status).toBe("fail");
    expect(config?.message).toContain("models.default");
    t.cleanup();
  });
});

describe("read-only loading", () => {
  it("leaves a missing model key or bot token alone, but not a missing gateway token", () => {
    const t = tempDir();
    const file = path.join(t.dir, "c.json5");
    writeFileSync(
      file,
      `{ models: { default: "openai/gpt-4.1", providers: { openai: { kind: "openai", apiKey: "\${OPENAI_API_KEY}" } } },
         channels: { telegram: { accounts: { default: { token: "\${TELEGRAM_BOT_TOKEN}" } } } } }`,
    );
    expect(() => loadConfig({ file, env: {} })).toThrow(/OPENAI_API_KEY is not set/);
    const loaded = loadConfig({ file, env: {}, readOnly: true });
    expect(loaded.config.models.default).toBe("openai/gpt-4.1");
    writeFileSync(file, `{ gateway: { auth: { token: "\${SWITCHBOARD_TOKEN}" } } }`);
    expect(() => loadConfig({ file, env: {}, readOnly: true })).toThrow(
      /gateway\.auth\.token.*SWITCHBOARD_TOKEN/,
    );
    t.cleanup();
  });
});
