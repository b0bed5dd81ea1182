import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineJobKind, type HandlerRegistry, handleJobKind } from "../../../src/pipeline/handlers.js";
import { checkFollowUps } from "../../../src/pipeline/schema.js";
import { type JobContext, UnrecoverableJobError } from "../../../src/pipeline/types.js";

const ctx: JobContext = {
  signal: new AbortController().signal,
  stillOwner: async () => true,
  takeSteering: () => [],
};

describe("typed job kinds", () => {
  const kind = defineJobKind("archive", z.object({ childKey: z.string().min(1), n: z.number().default(1) }));

  it("builds jobs and follow-ups of its kind", () => {
    expect(kind.job("archive:x", { childKey: "x" })).toEqual({
      kind: "archive",
      id: "archive:x",
      data: { childKey: "x" },
    });
    expect(kind.followUp("archive:x", { childKey: "x" }, 500)).toEqual({
      type: "job",
      job: { kind: "archive", id: "archive:x", data: { childKey: "x" } },
      delayMs: 500,
    });
  });

  it("hands the handler parsed data, and fails malformed data for good, naming the field", async () => {
    const registry: HandlerRegistry = { beforeTurn: [], afterTurn: [], background: {} };
    const seen: unknown[] = [];
    handleJobKind(registry, kind, async (data) => {
      seen.push(data);
    });
    const run = registry.background.archive!;
    await run(kind.job("a", { childKey: "x" }), ctx);
    expect(seen).toEqual([{ childKey: "x", n: 1 }]);
    const bad = run({ kind: "archive", id: "b", data: { childKey: 7 } }, ctx);
    await expect(bad).rejects.toBeInstanceOf(UnrecoverableJobError);
    await expect(bad).rejects.toThrow(/archive job b: malformed data \(data\.childKey/);
  });
});

describe("checkFollowUps", () => {
  const job = (id: string) => ({ type: "job" as const, job: { kind: "announce" as const, id, data: {} } });

  it("keeps one follow-up per id, first wins", () => {
    const res = checkFollowUps({
      status: "ok",
      followUps: [job("a"), job("b"), { ...job("a"), delayMs: 5 }],
    });
    expect(res.followUps).toEqual([job("a"), job("b")]);
  });

  it("ends the run as error on an invalid follow-up (a turn without runId), never ok with work missing", () => {
    const turn = { sessionKey: "s", agentId: "main", text: "x", deliver: false, origin: "announce" };
    const res = checkFollowUps({
      status: "ok",
      followUps: [job("a"), { type: "turn", turn } as never],
    });
    expect(res.status).toBe("error");
    expect(res.error).toMatch(/invalid follow-up.*runId/s);
    expect(res.followUps).toEqual([job("a")]);
  });
});
