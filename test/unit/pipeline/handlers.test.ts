import { describe, expect, it } from "vitest";
import { z } from "zod";
import { silentLogger } from "../../../src/log.js";
import {
  defineJobKind,
  type HandlerRegistry,
  handleJobKind,
  onEveryTurnEnd,
  onTurnEnd,
  runAfterTurn,
} from "../../../src/pipeline/handlers.js";
import { checkFollowUps } from "../../../src/pipeline/schema.js";
import { turnMetaOf } from "../../../src/pipeline/turn-meta.js";
import {
  type JobContext,
  type TurnJob,
  type TurnOrigin,
  UnrecoverableJobError,
} from "../../../src/pipeline/types.js";

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

describe("after-turn hooks by origin (TurnMeta)", () => {
  const turn = (origin: TurnOrigin, meta?: Record<string, unknown>): TurnJob => ({
    runId: `r-${origin}`,
    sessionKey: "agent:main:main",
    agentId: "main",
    messages: [{ runId: `r-${origin}`, text: "x", ...(meta ? { meta } : {}) }],
    deliver: false,
    origin,
    timeoutMs: 0,
    attempt: 1,
    ...(meta ? { meta } : {}),
  });
  const cron = { jobId: "j", tickAt: 5, trigger: "schedule" };

  function registry() {
    const r: HandlerRegistry = { beforeTurn: [], afterTurn: [], background: {} };
    const seen: string[] = [];
    onEveryTurnEnd(r, async function every(job) {
      seen.push(`every:${job.origin}`);
      return [];
    });
    onTurnEnd(r, ["cron"], async function cronHook(_job, _o, meta) {
      seen.push(`cron:${meta.cron.jobId}:${meta.cron.trigger}`);
      return [];
    });
    onTurnEnd(r, ["spawn", "announce"], async function spawnHook(job, _o, meta) {
      seen.push(`spawn:${meta.origin}:${meta.spawn?.chain.join(",") ?? "none"}`);
      return meta.spawn ? [{ type: "job", job: { kind: "announce", id: `a:${job.runId}`, data: {} } }] : [];
    });
    return { r, seen };
  }

  it("calls a hook only for its origins, with the meta parsed for that origin", async () => {
    const { r, seen } = registry();
    await runAfterTurn(r, turn("cron", { cron }), { status: "ok" }, ctx.signal, silentLogger());
    await runAfterTurn(r, turn("inbound", { cron }), { status: "ok" }, ctx.signal, silentLogger());
    const spawned = await runAfterTurn(
      r,
      turn("spawn", { spawn: { requesterKey: "agent:main:main", childKey: "agent:main:subagent:c" } }),
      { status: "ok" },
      ctx.signal,
      silentLogger(),
    );
    await runAfterTurn(r, turn("announce"), { status: "ok" }, ctx.signal, silentLogger());
    expect(seen).toEqual([
      "every:cron",
      "cron:j:schedule",
      "every:inbound",
      "every:spawn",
      "spawn:spawn:",
      "every:announce",
      "spawn:announce:none",
    ]);
    expect(spawned.followUps).toEqual([
      { type: "job", job: { kind: "announce", id: "a:r-spawn", data: {} } },
    ]);
  });

  it("a meta its origin cannot read skips that origin's hooks (named in the reading); every-turn hooks still run", async () => {
    const { r, seen } = registry();
    const job = turn("cron", { cron: { jobId: "j", tickAt: "soon" } });
    const reading = turnMetaOf(job);
    expect(reading.ok).toBe(false);
    if (!reading.ok) expect(reading.error).toMatch(/meta\.cron\.tickAt/);
    const out = await runAfterTurn(r, job, { status: "ok" }, ctx.signal, silentLogger());
    expect(seen).toEqual(["every:cron"]);
    expect(out.status).toBe("ok");
  });

  it("a hook that keeps failing ends an ok run as error, naming the hook", async () => {
    const r: HandlerRegistry = { beforeTurn: [], afterTurn: [], background: {} };
    onTurnEnd(r, ["operator"], async function broken() {
      throw new Error("boom");
    });
    const out = await runAfterTurn(
      r,
      turn("operator"),
      { status: "ok", reply: "hi" },
      ctx.signal,
      silentLogger(),
    );
    expect(out).toMatchObject({ status: "error", reply: "hi" });
    expect(out.error).toContain("broken: boom");
  });
});
