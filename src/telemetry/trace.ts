/**
 * Tracing facade (API.md §8.6). The hot path calls these functions; while no OTLP endpoint is
 * configured they are a null test and a direct call: no OpenTelemetry package is even loaded
 * (`startTracing` imports `./otel.js` dynamically, only when `telemetry.otlp.endpoint` is set).
 *
 * One trace per accepted turn: `switchboard.enqueue` (a root, where the message or RPC was
 * accepted) → `switchboard.turn` (wherever the turn runs: the job carries the W3C `traceparent`
 * in its `meta`, so the trace crosses the BullMQ hop) → `switchboard.model`, `switchboard.tool`,
 * `switchboard.delivery`. Work one turn causes in another session (a sub-agent run, an announce,
 * an a2a step) starts a trace of its own with a link to the span that caused it.
 */

import type { SpanOptions, Tracing, TracingConfig } from "./types.js";

export type { SpanAttributes, SpanOptions, Tracing, TracingConfig } from "./types.js";

/** The part of a turn job the turn span reads (TurnJob satisfies it). */
export interface TracedJob {
  runId: string;
  sessionKey: string;
  agentId: string;
  origin: string;
  attempt: number;
  meta?: Record<string, unknown>;
  messages: ReadonlyArray<{ meta?: Record<string, unknown> }>;
}

/** The meta keys a turn request carries: its trace, and the span that caused it. */
export const TRACEPARENT = "traceparent";
export const TRACELINK = "tracelink";

let impl: Tracing | null = null;
let users = 0;
let starting: Promise<Tracing> | null = null;

/**
 * Turns tracing on for this process (refcounted: one exporter, the first configuration's, however
 * many apps ask); returns the matching stop, which flushes and unloads on the last one.
 */
export async function startTracing(cfg: TracingConfig): Promise<() => Promise<void>> {
  users++;
  if (!impl) {
    starting ??= import("./otel.js").then((m) => m.createTracing(cfg));
    try {
      impl = await starting;
    } catch (err) {
      users--;
      starting = null;
      throw err;
    }
  }
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    users--;
    if (users > 0 || !impl) return;
    const t = impl;
    impl = null;
    starting = null;
    await t.shutdown();
  };
}

/** A child span of the active one (or of `opts.parent`), around `fn`. */
export function traced<T>(
  name: string,
  sessionKey: string,
  fn: () => Promise<T>,
  opts?: SpanOptions,
): Promise<T> {
  return impl === null ? fn() : impl.span(name, sessionKey, fn, opts);
}

/** The `switchboard.turn` span of a job: child of the trace its first message was accepted in. */
export function tracedTurn<T>(job: TracedJob, fn: () => Promise<T>): Promise<T> {
  if (impl === null) return fn();
  const parent = str(job.messages[0]?.meta?.[TRACEPARENT]) ?? str(job.meta?.[TRACEPARENT]);
  // Messages collected into this turn were each accepted in a trace of their own.
  const links: string[] = [];
  for (const m of job.messages.slice(1)) {
    const tp = str(m.meta?.[TRACEPARENT]);
    if (tp && tp !== parent) links.push(tp);
  }
  return impl.span("switchboard.turn", job.sessionKey, fn, {
    ...(parent ? { parent } : {}),
    ...(links.length ? { links } : {}),
    attributes: {
      "switchboard.run_id": job.runId,
      "switchboard.agent": job.agentId,
      "switchboard.origin": job.origin,
      "switchboard.attempt": job.attempt,
    },
  });
}

/**
 * The request with the traceparent of a new `switchboard.enqueue` root span in its meta (one
 * trace per accepted turn), linked to the active span or to the one named by `meta.tracelink`.
 * Unchanged while tracing is off or when it already carries a trace (a second submit).
 */
export function withTrace<R extends { sessionKey: string; origin: string; meta?: Record<string, unknown> }>(
  req: R,
): R {
  if (impl === null || str(req.meta?.[TRACEPARENT])) return req;
  const link = impl.active() ?? str(req.meta?.[TRACELINK]);
  const tp = impl.enqueue(req.sessionKey, { "switchboard.origin": req.origin }, link);
  return tp ? { ...req, meta: { ...req.meta, [TRACEPARENT]: tp } } : req;
}

/**
 * Marks follow-ups planned inside a turn with that turn's span, so the work they start links back
 * to it (they are submitted after the turn, outside its span).
 */
export function markFollowUps(
  followUps: ReadonlyArray<
    | { type: "job"; job: { data: Record<string, unknown> } }
    | { type: "turn"; turn: { meta?: Record<string, unknown> } }
  >,
): void {
  if (impl === null || followUps.length === 0) return;
  const tp = impl.active();
  if (!tp) return;
  for (const f of followUps) {
    if (f.type === "job") f.job.data[TRACELINK] ??= tp;
    else f.turn.meta = { ...f.turn.meta, [TRACELINK]: str(f.turn.meta?.[TRACELINK]) ?? tp };
  }
}

/** Runs a background job's handler with the span that planned it active (see markFollowUps). */
export function withinLink<T>(data: Record<string, unknown>, fn: () => Promise<T>): Promise<T> {
  if (impl === null) return fn();
  const tp = str(data[TRACELINK]);
  return tp ? impl.within(tp, fn) : fn();
}

/** The active span's traceparent (for a hand-off to another process), if tracing. */
export function activeTraceparent(): string | undefined {
  return impl?.active();
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v.length > 0 ? v : undefined;
}
