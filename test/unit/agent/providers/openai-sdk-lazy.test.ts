import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type OpenAIFake, startOpenAIFake } from "../../../fakes/openai.js";
import { distModule, runFreshNode, WATCH_MODULES } from "../../../helpers.js";

let fake: OpenAIFake;
beforeEach(async () => {
  fake = await startOpenAIFake();
});
afterEach(async () => {
  await fake.close();
});

/**
 * A fresh node (built dist) with a resolve hook that reports every module it loads: an `openai`
 * provider completes (plain and streamed), then pings; which of the SDK's modules were loaded by then.
 */
function run(
  baseUrl: string,
): Promise<{ afterComplete: number; afterPing: number; ping: boolean; text: string }> {
  const script = `${WATCH_MODULES}
    const settle = () => new Promise((r) => setTimeout(r, 100));
    const sdk = () => seen.filter((u) => u.includes("/node_modules/openai/")).length;
    const { createProvider } = await import(${distModule("agent/providers/index.js")});
    const { silentLogger } = await import(${distModule("log.js")});
    const p = createProvider("oa", { kind: "openai", baseUrl: ${JSON.stringify(baseUrl)}, apiKey: "k", models: {}, timeoutMs: 5000, maxRetries: 0 }, { logger: silentLogger(), baseDir: "." });
    const req = { model: "fake-model", system: "s", messages: [{ role: "user", content: "hello" }], tools: [] };
    const a = await p.complete(req);
    let streamed = "";
    const b = await p.complete({ ...req, onTextDelta: (d) => { streamed += d; } });
    await settle();
    const afterComplete = sdk();
    const ping = await p.ping();
    await settle();
    console.log(JSON.stringify({ afterComplete, afterPing: sdk(), ping: ping.ok, text: a.text + "|" + b.text + "|" + streamed }));`;
  return runFreshNode(script, [], 30_000);
}

describe("openai provider: the SDK is loaded by ping only", () => {
  it("completes (plain and streamed) without loading the SDK; the first ping loads it", async () => {
    const r = await run(fake.url);
    expect(r.text).toBe("hello|hello|hello");
    expect(r.afterComplete).toBe(0);
    expect(r.ping).toBe(true);
    expect(r.afterPing).toBeGreaterThan(10);
  }, 30_000);
});
