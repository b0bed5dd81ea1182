import { context, createContextKey, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  linkMeta,
  markFollowUps,
  startTracing,
  TRACELINK,
  TRACEPARENT,
  traced,
  tracedTurn,
  traceLinkOf,
  turnSpan,
  withTrace,
} from "../../../src/telemetry/index.js";
import { type OtlpFake, type ReceivedSpan, startOtlpFake } from "../../fakes/otlp.js";

/**
 * Tracing without a context manager (src/telemetry/trace.ts): a span is a traceparent passed down
 * by hand. The SDK's AsyncLocalStorage context manager would enable async_hooks for every promise
 * of the process (~0.1 ms CPU per turn on Node 20/22), so with tracing on nothing may register one,
 * nor a global tracer provider (@anthropic-ai/sdk records spans through it).
 */

const KEY = "agent:main:unit";
const JOB = { runId: "r1", sessionKey: KEY, agentId: "main", origin: "operator", attempt: 1, messages: [] };

/** `00-<trace>-<span>-<flags>` → its ids. */
function ids(tp: string | undefined): { traceId: string; spanId: string } {
  const [, traceId = "", spanId = ""] = (tp ?? "").split("-");
  return { traceId, spanId };
}

describe("tracing passes spans explicitly", () => {
  let otlp: OtlpFake;
  let stop: () => Promise<void>;
  let exported: ReceivedSpan[] | null;

  beforeEach(async () => {
    otlp = await startOtlpFake();
    stop = await startTracing({ endpoint: otlp.url, headers: {}, serviceName: "unit" });
    exported = null;
  });
  afterEach(async () => {
    await stop();
    await otlp.close();
  });

  /** Stops tracing (flushes) and returns what the collector received. */
  async function flushed(): Promise<ReceivedSpan[]> {
    await stop();
    exported ??= otlp.spans;
    return exported;
  }

  it("registers no context manager and no global tracer provider", async () => {
    const probe = createContextKey("probe");
    await traced("switchboard.tool", KEY, async (span) => {
      expect(span).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      // Nothing is active inside a span, and the global context manager is the no-op one: with a
      // registered one (AsyncLocalStorage), `with` would make the probe visible to `active()`.
      expect(trace.getActiveSpan()).toBeUndefined();
      expect(context.active()).toBe(ROOT_CONTEXT);
      expect(context.with(ROOT_CONTEXT.setValue(probe, 1), () => context.active().getValue(probe))).toBe(
        undefined,
      );
      // The global API still hands out the no-op tracer: a library's own spans are not recorded.
      expect(trace.getTracer("probe").startSpan("probe").isRecording()).toBe(false);
    });
  });

  it("a span is a child of opts.parent only; without one it is a root", async () => {
    let outer: string | undefined;
    let inner: string | undefined;
    let stray: string | undefined;
    await traced("switchboard.turn", KEY, async (span) => {
      outer = span;
      inner = await traced("switchboard.model", KEY, async (s) => s, { parent: span });
      // called inside the outer span's function, but given no parent: a root of its own trace
      stray = await traced("switchboard.delivery", KEY, async (s) => s);
    });
    const spans = await flushed();
    const byId = (tp: string | undefined) => spans.find((s) => s.spanId === ids(tp).spanId);
    expect(byId(outer)).toMatchObject({ name: "switchboard.turn", traceId: ids(outer).traceId });
    expect(byId(outer)?.parentSpanId).toBeUndefined();
    expect(byId(inner)).toMatchObject({
      name: "switchboard.model",
      traceId: ids(outer).traceId,
      parentSpanId: ids(outer).spanId,
    });
    expect(byId(stray)?.parentSpanId).toBeUndefined();
    expect(byId(stray)?.traceId).not.toBe(ids(outer).traceId);
  });

  it("a turn's span is found by its job while it runs; follow-ups and linked submits point at it", async () => {
    const job = { ...JOB };
    const followUps: Parameters<typeof markFollowUps>[0] = [
      { type: "job", job: { data: {} } },
      { type: "turn", turn: {} },
    ];
    let given: string | undefined;
    await tracedTurn(job, async (span) => {
      given = span;
      expect(turnSpan(job)).toBe(span);
      expect(turnSpan({ ...job })).toBeUndefined(); // by the job object, not its fields
      markFollowUps(followUps, span);
    });
    expect(given).toBeDefined();
    const [bg, turn] = followUps;
    expect(bg?.type === "job" && traceLinkOf(bg.job.data)).toBe(given);
    expect(turn?.type === "turn" && turn.turn.meta?.[TRACELINK]).toBe(given);

    // A turn submitted with `linkMeta(cause)`: its enqueue root links to the cause.
    const meta: Record<string, unknown> = { spawn: {}, ...linkMeta(given) };
    const req = withTrace({ sessionKey: KEY, origin: "spawn", meta });
    expect(req.meta?.[TRACEPARENT]).toMatch(/^00-/);
    const spans = await flushed();
    const enqueue = spans.find((s) => s.name === "switchboard.enqueue");
    expect(enqueue?.parentSpanId).toBeUndefined();
    expect(enqueue?.links).toEqual([ids(given)]);
  });
});

describe("tracing off", () => {
  it("every handle is undefined and the function is called directly", async () => {
    const job = { ...JOB };
    expect(await traced("x", KEY, async (span) => span)).toBeUndefined();
    expect(await tracedTurn(job, async (span) => [span, turnSpan(job)])).toEqual([undefined, undefined]);
    expect(linkMeta(undefined)).toEqual({});
    expect(traceLinkOf({ [TRACELINK]: "00-a-b-01" })).toBeUndefined();
    const f: Parameters<typeof markFollowUps>[0] = [{ type: "job", job: { data: {} } }];
    markFollowUps(f, undefined);
    expect(f[0]?.type === "job" && f[0].job.data).toEqual({});
  });
});
