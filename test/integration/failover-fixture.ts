/**
 * What the failover tests share (local and bullmq): an OpenAI-compatible primary and an Anthropic
 * fallback on their loopback fakes, and a session's assistant lines.
 */
import type { ConfigInput } from "../../src/config/index.js";
import type { AnthropicFake } from "../fakes/anthropic.js";
import type { OpenAIFake } from "../fakes/openai.js";
import type { TestApp } from "../harness.js";

export interface FailoverModels {
  oa: OpenAIFake;
  an: AnthropicFake;
  /** `models.failover`. */
  failover: Record<string, number>;
  primary?: string;
  fallbacks?: string[];
  /** More settings of the `oa` provider (model prices, …). */
  oaExtra?: Record<string, unknown>;
}

/**
 * `models` with `oa` (openai) and `an` (anthropic) on the fakes, each keeping `maxRetries: 2` and
 * a 700 ms timeout; `oa/gpt` → `an/claude` unless told otherwise.
 */
export function failoverModels(o: FailoverModels): ConfigInput["models"] {
  return {
    default: o.primary ?? "oa/gpt",
    fallbacks: o.fallbacks ?? ["an/claude"],
    failover: o.failover,
    providers: {
      oa: {
        kind: "openai",
        baseUrl: o.oa.url,
        apiKey: "sk-oa-test-1234567890",
        timeoutMs: 700,
        maxRetries: 2,
        ...o.oaExtra,
      },
      an: {
        kind: "anthropic",
        baseUrl: o.an.url,
        apiKey: "sk-an-test-1234567890",
        timeoutMs: 700,
        maxRetries: 2,
      },
    },
  };
}

/** The assistant lines of `sessionKey`'s transcript tail (its last 20 lines), oldest first. */
export async function assistantLines(t: TestApp, sessionKey: string) {
  const entry = await t.app.services.store.sessions.get(sessionKey);
  const lines = await t.app.services.store.transcripts.readTail(
    { agentId: entry!.agentId, sessionId: entry!.sessionId },
    { limit: 20 },
  );
  return lines.filter((l) => l.role === "assistant");
}
