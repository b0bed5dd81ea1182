import { describe, expect, it } from "vitest";
import { runRecordSchema } from "../../../src/pipeline/bullmq/schema.js";
import { finalResultOf, turnRequestSchema } from "../../../src/pipeline/schema.js";
import type { TurnRequest } from "../../../src/pipeline/types.js";
import type { RunRecord } from "../../../src/store/types.js";

/**
 * What the drivers read back (Redis, the journal) is what was written, field for field: the build
 * proves each schema names every field of its type (src/exact.ts); these check the values.
 */
describe("pipeline records round-trip through their schemas", () => {
  it("a run record keeps every field, usage.model included", () => {
    const run: Required<RunRecord> = {
      runId: "r1",
      sessionKey: "agent:main:main",
      agentId: "main",
      status: "waiting",
      createdAt: 1,
      startedAt: 2,
      endedAt: 3,
      reply: "hi",
      error: "e",
      usage: { input: 1, output: 2, cacheRead: 3, cacheWrite: 4, cost: 0.5, model: "p/m" },
      model: "p/m",
      fallbacks: [
        { model: "p/a", class: "overloaded" },
        { model: "p/b", class: "auth", skipped: true },
      ],
      origin: "inbound",
      deliver: true,
      deliveryError: "d",
      waitingFor: { approvalId: "a1", tool: "exec", args: { cmd: "ls" } },
    };
    expect(runRecordSchema.parse(JSON.parse(JSON.stringify(run)))).toStrictEqual(run);
  });

  it("a turn request keeps every field", () => {
    const req: Required<TurnRequest> = {
      sessionKey: "agent:main:main",
      agentId: "main",
      text: "hello",
      provenance: { kind: "external_user", channel: "telegram", senderId: "1", senderName: "Ann" },
      deliver: true,
      origin: "inbound",
      extraSystem: "x",
      timeoutMs: 1000,
      runId: "r1",
      meta: { a: 1 },
    };
    expect(turnRequestSchema.parse(JSON.parse(JSON.stringify(req)))).toStrictEqual(req);
  });

  it("finalResultOf keeps the schema's fields, drops undefined ones, empty fallbacks and follow-ups", () => {
    const result = {
      status: "ok" as const,
      reply: "r",
      error: undefined,
      usage: { input: 1, output: 2 },
      model: "p/m",
      fallbacks: [],
      deliveryError: "d",
      followUps: [],
    };
    expect(finalResultOf(result)).toStrictEqual({
      status: "ok",
      reply: "r",
      usage: { input: 1, output: 2 },
      model: "p/m",
      deliveryError: "d",
    });
    const fb = [{ model: "p/a", class: "overloaded" }];
    expect(finalResultOf({ status: "error", fallbacks: fb })).toStrictEqual({
      status: "error",
      fallbacks: fb,
    });
  });
});
