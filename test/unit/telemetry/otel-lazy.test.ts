import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { withTrace } from "../../../src/telemetry/index.js";
import { type OtlpFake, startOtlpFake } from "../../fakes/otlp.js";
import { distModule, runFreshNode, tempDir, WATCH_MODULES } from "../../helpers.js";

/**
 * Tracing costs nothing while `telemetry.otlp.endpoint` is unset (API.md §8.6, issue 51): a fresh
 * node (built dist) with a resolve hook that reports every module it loads runs a gateway turn;
 * no OpenTelemetry SDK module is loaded, and with an endpoint it is.
 */

function run(stateDir: string, endpoint: string | null): Promise<{ status: string; sdk: number }> {
  const script = `${WATCH_MODULES}
    const { createApp } = await import(${distModule("app/index.js")});
    const { parseConfig } = await import(${distModule("config/index.js")});
    const { silentLogger } = await import(${distModule("log.js")});
    const endpoint = ${JSON.stringify(endpoint)};
    const config = parseConfig({
      stateDir: ${JSON.stringify(stateDir)},
      models: { default: "s/echo", providers: { s: { kind: "scripted", rules: [{ match: ".*", reply: "ok" }] } } },
      ...(endpoint ? { telemetry: { otlp: { endpoint } } } : {}),
    });
    const app = await createApp({ config, source: null, baseDir: ${JSON.stringify(stateDir)} }, { logger: silentLogger(), role: "gateway", serve: false });
    await app.start();
    const r = await app.rpc.dispatch({ id: 1, method: "chat.send", params: { sessionKey: "main", message: "hi", timeoutSeconds: 10 } });
    await app.stop();
    await new Promise((r) => setTimeout(r, 100));
    const sdk = seen.filter((u) => /node_modules\\/@opentelemetry\\/(sdk-|exporter-|resources|core)/.test(u)).length;
    console.log(JSON.stringify({ status: r.result?.status ?? "rpc error", sdk }));`;
  return runFreshNode(script, [], 30_000);
}

describe("tracing off loads no OpenTelemetry SDK", () => {
  it("a turn with no endpoint loads none of it; with an endpoint it is loaded", async () => {
    const otlp: OtlpFake = await startOtlpFake();
    const off = tempDir();
    const on = tempDir();
    try {
      const plain = await run(off.dir, null);
      expect(plain).toEqual({ status: "ok", sdk: 0 });
      const traced = await run(on.dir, otlp.url);
      expect(traced.status).toBe("ok");
      expect(traced.sdk).toBeGreaterThan(0);
      expect(otlp.spans.map((s) => s.name)).toContain("switchboard.turn");
    } finally {
      off.cleanup();
      on.cleanup();
      await otlp.close();
    }
  }, 40_000);

  it("only src/telemetry/otel.ts imports the SDK, and only trace.ts imports it, dynamically", () => {
    const root = path.resolve(import.meta.dirname, "../../../src");
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((n) => {
        const p = path.join(dir, n);
        return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
      });
    const importers: string[] = [];
    const otelUsers: string[] = [];
    for (const f of files(root)) {
      const text = readFileSync(f, "utf8");
      if (/from\s+["']@opentelemetry\/(?!api["'])/.test(text)) importers.push(path.relative(root, f));
      if (/["']\.\/otel\.js["']/.test(text))
        otelUsers.push(
          `${path.relative(root, f)}:${/import\(\s*["']\.\/otel\.js["']\s*\)/.test(text) ? "dynamic" : "static"}`,
        );
    }
    expect(importers).toEqual(["telemetry/otel.ts"]);
    expect(otelUsers).toEqual(["telemetry/trace.ts:dynamic"]);
  });

  it("with tracing off a request is submitted unchanged (no trace in its meta)", () => {
    const req = { sessionKey: "agent:main:main", origin: "operator", meta: { a: 1 } };
    expect(withTrace(req)).toBe(req);
  });
});
