import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  createProvider,
  DEMO_MARKER,
  isModelAllowed,
  priceOf,
  priceUsage,
  resolveModelRef,
} from "../../../../src/agent/providers/index.js";
import { providerSchema } from "../../../../src/config/schema.js";
import { SwitchboardError } from "../../../../src/errors.js";
import { silentLogger } from "../../../../src/log.js";
import { tempDir } from "../../../helpers.js";

describe("resolveModelRef", () => {
  it("splits at the first slash", () => {
    expect(resolveModelRef("openai/gpt-4.1")).toEqual({ provider: "openai", model: "gpt-4.1" });
    expect(resolveModelRef("openrouter/meta-llama/llama-3-70b")).toEqual({
      provider: "openrouter",
      model: "meta-llama/llama-3-70b",
    });
  });

  it.each(["gpt-4.1", "/gpt", "openai/", "", "open ai/gpt"])(
    "rejects %j with INVALID_PARAMS naming the ref",
    (ref) => {
      let err: unknown;
      try {
        resolveModelRef(ref);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SwitchboardError);
      expect((err as SwitchboardError).code).toBe("INVALID_PARAMS");
      expect((err as Error).message).toContain(`"${ref}"`);
    },
  );
});

describe("isModelAllowed", () => {
  const configured = ["openai", "local", "scripted"];
  it.each<[string, string[], boolean]>([
    ["openai/gpt-4.1", [], true],
    ["unknown/gpt-4.1", [], false],
    ["openai/gpt-4.1", ["openai/gpt-4.1"], true],
    ["openai/gpt-4o", ["openai/gpt-4.1"], false],
    ["local/llama3", ["openai/gpt-4.1", "local/*"], true],
    ["local/org/model", ["local/*"], true],
    ["openai/gpt-4.1-mini", ["openai/gpt-4*"], true],
    ["openai/o3", ["openai/gpt-4*"], false],
    ["unknown/x", ["unknown/*"], false],
    ["unknown/x", ["*"], false],
    ["scripted/demo", ["*"], true],
    ["localx/model", ["local/*"], false],
    ["not-a-ref", [], false],
  ])("%s with allowed %j → %s", (ref, allowed, expected) => {
    expect(isModelAllowed(ref, allowed, configured)).toBe(expected);
  });
});

describe("priceUsage", () => {
  const price = { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 };

  it("prices every token class per million", () => {
    const priced = priceUsage({ input: 1000, output: 2000, cacheRead: 10_000, cacheWrite: 4000 }, price);
    // 0.003 + 0.03 + 0.003 + 0.015
    expect(priced.cost).toBeCloseTo(0.051, 10);
    expect(priced).toMatchObject({ input: 1000, output: 2000, cacheRead: 10_000, cacheWrite: 4000 });
  });

  it("leaves usage without a price unpriced, and does not mutate its input", () => {
    const usage = { input: 10, output: 5 };
    expect(priceUsage(usage)).toEqual({ input: 10, output: 5 });
    expect(priceUsage(usage, price).cost).toBeCloseTo((10 * 3 + 5 * 15) / 1e6, 12);
    expect(usage).toEqual({ input: 10, output: 5 });
  });

  it("finds a model's price in provider config", () => {
    const cfg = providerSchema.parse({
      kind: "openai",
      models: { "gpt-4.1": { price: { inputPerMTok: 2 } } },
    });
    expect(priceOf({ oa: cfg }, "oa/gpt-4.1")).toEqual({
      inputPerMTok: 2,
      outputPerMTok: 0,
      cacheReadPerMTok: 0,
      cacheWritePerMTok: 0,
    });
    expect(priceOf({ oa: cfg }, "oa/other")).toBeUndefined();
    expect(priceOf({ oa: cfg }, "xx/gpt-4.1")).toBeUndefined();
  });
});

describe("createProvider", () => {
  it("builds each kind and resolves a scripted script against baseDir", async () => {
    const tmp = tempDir("sb-providers-");
    try {
      writeFileSync(path.join(tmp.dir, "rules.json5"), `[{ match: "hi", reply: "from file" }]`);
      const ctx = { logger: silentLogger(), baseDir: tmp.dir };
      const scripted = createProvider(
        "s",
        providerSchema.parse({ kind: "scripted", script: "rules.json5" }),
        ctx,
      );
      expect(scripted.kind).toBe("scripted");
      const r = await scripted.complete({
        model: "m",
        system: "",
        messages: [{ role: "user", content: "hi" }],
        tools: [],
      });
      expect(r.text).toBe("from file");

      const demo = createProvider("scripted", providerSchema.parse({ kind: "scripted" }), {
        ...ctx,
        demo: true,
      });
      const d = await demo.complete({
        model: "demo",
        system: "",
        messages: [{ role: "user", content: "x" }],
        tools: [],
      });
      expect(d.text).toContain(DEMO_MARKER);

      expect(createProvider("o", providerSchema.parse({ kind: "openai" }), ctx)).toMatchObject({
        id: "o",
        kind: "openai",
      });
      expect(
        createProvider("a", providerSchema.parse({ kind: "anthropic", apiKey: "k-1234" }), ctx),
      ).toMatchObject({
        id: "a",
        kind: "anthropic",
      });
    } finally {
      tmp.cleanup();
    }
  });
});
