import { describe, expect, it } from "vitest";
import { TurnControl, turnJobOf } from "../../../src/pipeline/turn-core.js";
import type { JobHandlers, TurnRequest } from "../../../src/pipeline/types.js";

/** The turn core both queue drivers share (local/turn-runner.ts, bullmq/turns.ts). */

const req = (text: string, over: Partial<TurnRequest> = {}): TurnRequest => ({
  sessionKey: "agent:main:main",
  agentId: "main",
  text,
  deliver: true,
  origin: "inbound",
  ...over,
});

/** Handlers whose turn waits for its signal (or answers at once with `reply`). */
function handlers(reply?: string, seen: string[][] = []): JobHandlers {
  return {
    async turn(_job, ctx) {
      seen.push(ctx.takeSteering());
      if (reply !== undefined) return { status: "ok", reply };
      await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
      return { status: "ok", reply: "late" };
    },
    async background() {},
  };
}

describe("turn core", () => {
  it("builds one job from the collected messages: the first one's settings, each message's own meta", () => {
    const job = turnJobOf(
      [
        { runId: "a", req: req("one", { meta: { parts: [] }, timeoutMs: 50 }) },
        { runId: "b", req: req("two", { extraSystem: "x" }) },
      ],
      2,
    );
    expect(job).toEqual({
      runId: "a",
      sessionKey: "agent:main:main",
      agentId: "main",
      messages: [
        { runId: "a", text: "one", meta: { parts: [] } },
        { runId: "b", text: "two", extraSystem: "x" },
      ],
      deliver: true,
      origin: "inbound",
      timeoutMs: 50,
      attempt: 2,
      meta: { parts: [] },
    });
  });

  it("a cancel forces the final status; once the handler returned, cancels and steering no longer reach it", async () => {
    const control = new TurnControl();
    const seen: string[][] = [];
    expect(control.steer("go left")).toBe(true);
    const running = control.run(
      handlers(undefined, seen),
      turnJobOf([{ runId: "a", req: req("x") }], 1),
      async () => true,
    );
    expect(control.cancel("aborted")).toBe(true);
    const result = await running;
    expect(result).toEqual({ status: "aborted", reply: "late" });
    expect(seen).toEqual([["go left"]]);
    expect(control.cancel("timeout")).toBe(false);
    expect(control.steer("too late")).toBe(false);
  });

  it("times out by the job's timeout, and a handler without a final status or one that throws ends as error", async () => {
    const timed = await new TurnControl().run(
      handlers(),
      turnJobOf([{ runId: "a", req: req("x", { timeoutMs: 20 }) }], 1),
      async () => true,
    );
    expect(timed.status).toBe("timeout");
    const job = turnJobOf([{ runId: "b", req: req("x") }], 1);
    const none = await new TurnControl().run(
      { turn: async () => ({ status: "queued" }) as never, background: async () => {} },
      job,
      async () => true,
    );
    expect(none).toEqual({ status: "error", error: "turn handler returned no final status" });
    const threw = await new TurnControl().run(
      {
        turn: async () => {
          throw new Error("boom");
        },
        background: async () => {},
      },
      job,
      async () => true,
    );
    expect(threw).toEqual({ status: "error", error: "boom" });
    expect(await new TurnControl().run(null, job, async () => true)).toEqual({
      status: "error",
      error: "no turn handler",
    });
  });

  it("stop and a lost lock abort without an outcome, and not a turn that already returned", async () => {
    const stopped = new TurnControl();
    stopped.stop();
    expect(stopped.shutdown).toBe(true);
    expect(stopped.ac.signal.aborted).toBe(true);
    expect(stopped.cancel("aborted")).toBe(false);
    const lost = new TurnControl();
    lost.lose();
    expect(lost.lostLock && lost.ac.signal.aborted).toBe(true);
    const done = new TurnControl();
    await done.run(handlers("hi"), turnJobOf([{ runId: "c", req: req("x") }], 1), async () => true);
    done.stop();
    done.lose();
    expect(done.shutdown || done.lostLock || done.ac.signal.aborted).toBe(false);
  });
});
