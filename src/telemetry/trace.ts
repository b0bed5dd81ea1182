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
 *
 * A span is a traceparent you pass down. There is no "active" span (no context manager: the
 * AsyncLocalStorage one enables async_hooks, an init hook on every promise of the process, ~0.1 ms
 * CPU per turn on Node 20/22): `traced` hands its function the new span's traceparent, and the
 * code that works inside it passes that string on by hand, as `opts.parent` of a child span, as
 * `DeliveryRequest.traceparent` (the delivery span's parent, also across a worker's hand-off), as
 * `meta.tracelink` of a turn it submits (`linkMeta`: the new trace links to it), or as
 * `ToolContext.traceparent` to a tool. A turn's span is found by its job (`turnSpan`: the runtime,
 * the chat side, the after-turn hooks); a background job's planning span by its data
 * (`traceLinkOf`, set by `markFollowUps`). While tracing is off every one of them is undefined.
 * Operator notices of a budget reached are not part of any turn's trace (one post for many turns).
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

/**
 * A span around `fn`, which gets the span's traceparent (undefined while tracing is off) to pass
 * to what it does; a child of `opts.parent`, else a root.
 */
export function traced<T>(
  name: string,
  sessionKey: string,
  fn: (span: string | undefined) => Promise<T>,
  opts?: SpanOptions,
): Promise<T> {
  return impl === null ? fn(undefined) : impl.span(name, sessionKey, fn, opts);
}

/** The `switchboard.turn` span of each running job (see `turnSpan`). */
const turnSpans = new WeakMap<object, string>();

/**
 * The `switchboard.turn` span of a job: child of the trace its first message was accepted in.
 * `fn` gets its traceparent, which `turnSpan(job)` also returns to the code given the same job.
 */
export function tracedTurn<T>(job: TracedJob, fn: (span: string | undefined) => Promise<T>): Promise<T> {
  if (impl === null) return fn(undefined);
  const parent = str(job.messages[0]?.meta?.[TRACEPARENT]) ?? str(job.meta?.[TRACEPARENT]);
  // Messages collected into this turn were each accepted in a trace of their own.
  const links: string[] = [];
  for (const m of job.messages.slice(1)) {
    const tp = str(m.meta?.[TRACEPARENT]);
    if (tp && tp !== parent) links.push(tp);
  }
  return impl.span(
    "switchboard.turn",
    job.sessionKey,
    (span) => {
      if (span) turnSpans.set(job, span);
      return fn(span);
    },
    {
      ...(parent ? { parent } : {}),
      ...(links.length ? { links } : {}),
      attributes: {
        "switchboard.run_id": job.runId,
        "switchboard.agent": job.agentId,
        "switchboard.origin": job.origin,
        "switchboard.attempt": job.attempt,
      },
    },
  );
}

/** The traceparent of the `switchboard.turn` span `job` runs in (undefined outside `tracedTurn`, or off). */
export function turnSpan(job: object): string | undefined {
  return impl === null ? undefined : turnSpans.get(job);
}

/**
 * The request with the traceparent of a new `switchboard.enqueue` root span in its meta (one
 * trace per accepted turn), linked to the span named by `meta.tracelink` (see `linkMeta`).
 * Unchanged while tracing is off or when it already carries a trace (a second submit).
 */
export function withTrace<R extends { sessionKey: string; origin: string; meta?: Record<string, unknown> }>(
  req: R,
): R {
  if (impl === null || str(req.meta?.[TRACEPARENT])) return req;
  const tp = impl.enqueue(req.sessionKey, { "switchboard.origin": req.origin }, str(req.meta?.[TRACELINK]));
  return tp ? { ...req, meta: { ...req.meta, [TRACEPARENT]: tp } } : req;
}

/**
 * Meta to spread into a turn request caused by span `cause` (a tool call's, a background job's
 * planning turn's): its trace will link to it. Empty without one (tracing off).
 */
export function linkMeta(cause: string | undefined): { [TRACELINK]?: string } {
  return cause ? { [TRACELINK]: cause } : {};
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
  span: string | undefined,
): void {
  if (!span) return;
  for (const f of followUps) {
    if (f.type === "job") f.job.data[TRACELINK] ??= span;
    else f.turn.meta = { ...f.turn.meta, [TRACELINK]: str(f.turn.meta?.[TRACELINK]) ?? span };
  }
}

/**
 * The span that planned a background job (see `markFollowUps`): what the job delivers is its
 * child, what it submits links to it. Undefined while tracing is off.
 */
export function traceLinkOf(data: Record<string, unknown>): string | undefined {
  return impl === null ? undefined : str(data[TRACELINK]);
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v.length > 0 ? v : undefined;
}
