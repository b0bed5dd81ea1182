import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/**
 * Prometheus metrics (API.md §8.6), one registry per process, through prom-client. Labels are
 * bounded: statuses, error classes, configured model refs, channel names and account ids, agent
 * ids — never a session key, a user id or a chat id.
 *
 * The instruments are exported for the rooms that own their sources (budgets add to `costUsd`, the failover chain counts `modelCalls` by class);
 * each one-line `count…` helper below records only while some app in this process has metrics on
 * (`gateway.metrics.enabled`, the default), so a process with metrics off pays one boolean test.
 * Gauges that describe an app (queue depth, channels, pending approvals) read it at scrape time
 * from sources the app adds and removes (`addQueueDepthSource`, `addChannelSource`,
 * `addApprovalsSource`).
 */

export const registry = new Registry();

/** Turn durations: a chat turn is seconds to a few minutes. */
const TURN_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

type DepthSource = () => number | Promise<number>;
type ChannelSource = () => Iterable<{ channel: string; account: string; up: boolean }>;
const depthSources = new Set<DepthSource>();
const channelSources = new Set<ChannelSource>();
const approvalSources = new Set<DepthSource>();

/** Sums a set of count sources at scrape time; a source that cannot answer now counts nothing. */
async function sumSources(sources: Set<DepthSource>): Promise<number> {
  let n = 0;
  for (const s of sources) {
    try {
      n += await s();
    } catch {
      // Redis down: nothing this scrape
    }
  }
  return n;
}

export const metrics = {
  /** Finished turns by final status (ok, error, timeout, aborted). */
  turns: new Counter({
    name: "switchboard_turns_total",
    help: "Turns run to a final status, by status.",
    labelNames: ["status"] as const,
    registers: [registry],
  }),
  turnDuration: new Histogram({
    name: "switchboard_turn_duration_seconds",
    help: "Wall time of a turn, from the handler taking it to its outcome (delivery included).",
    buckets: TURN_BUCKETS,
    registers: [registry],
  }),
  /** Model calls by configured model ref and class: "ok", or the failure's error class. */
  modelCalls: new Counter({
    name: "switchboard_model_calls_total",
    help: 'Model calls by model and class ("ok" on success, else the error class).',
    labelNames: ["model", "class"] as const,
    registers: [registry],
  }),
  queueDepth: new Gauge({
    name: "switchboard_queue_depth",
    help: "Turns and jobs accepted but not started (local: messages waiting in lanes; bullmq: jobs waiting for a worker).",
    registers: [registry],
    async collect() {
      this.set(await sumSources(depthSources));
    },
  }),
  /** Deliveries by channel and outcome (sent, duplicate, failed, blocked, no-route, handed-off). */
  deliveries: new Counter({
    name: "switchboard_deliveries_total",
    help: "Outbound deliveries by channel and status.",
    labelNames: ["channel", "status"] as const,
    registers: [registry],
  }),
  channelUp: new Gauge({
    name: "switchboard_channel_up",
    help: "1 when the channel account is connected, else 0.",
    labelNames: ["channel", "account"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const s of channelSources)
        for (const c of s()) this.set({ channel: c.channel, account: c.account }, c.up ? 1 : 0);
    },
  }),
  /** Approvals waiting for a person: counted at scrape time from the sources apps add. */
  approvalsPending: new Gauge({
    name: "switchboard_approvals_pending",
    help: "Tool calls waiting for an approval.",
    registers: [registry],
    async collect() {
      this.set(await sumSources(approvalSources));
    },
  }),
  /** Model spend in US dollars by agent (priced usage of every model call). */
  costUsd: new Counter({
    name: "switchboard_cost_usd_total",
    help: "Model cost in USD by agent, from the configured per-model prices.",
    labelNames: ["agent"] as const,
    registers: [registry],
  }),
};

let enabledApps = 0;
let defaultsOn = false;

/**
 * How often the event-loop lag is sampled (`nodejs_eventloop_lag_*`), ms. prom-client's default,
 * 10 ms, wakes the process 100 times a second even when idle: 4.7 ms CPU a second on this
 * machine's VM, against 0.8 at 100 ms (`monitorEventLoopDelay` alone, idle). At 100 ms a stall
 * still shows in `max` and the percentiles once it spans a sample.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * An app with metrics on: counting starts (and the process defaults: CPU, memory, event loop,
 * GC). Returns the matching `off`, called when that app stops.
 */
export function enableMetrics(): () => void {
  enabledApps++;
  if (!defaultsOn) {
    defaultsOn = true;
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  }
  let done = false;
  return () => {
    if (done) return;
    done = true;
    enabledApps--;
  };
}

export function metricsOn(): boolean {
  return enabledApps > 0;
}

/** The scrape body and its content type (`text/plain; version=0.0.4; charset=utf-8`). */
export async function metricsText(): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}

/** Adds a queue-depth source (summed at scrape time); returns its removal. */
export function addQueueDepthSource(source: DepthSource): () => void {
  depthSources.add(source);
  return () => depthSources.delete(source);
}

/** Adds a source of the number of pending approvals (summed at scrape time); returns its removal. */
export function addApprovalsSource(source: DepthSource): () => void {
  approvalSources.add(source);
  return () => approvalSources.delete(source);
}

/** Adds a source of channel accounts and whether each is connected; returns its removal. */
export function addChannelSource(source: ChannelSource): () => void {
  channelSources.add(source);
  return () => channelSources.delete(source);
}

export function countTurn(status: string, seconds: number): void {
  if (enabledApps === 0) return;
  metrics.turns.inc({ status });
  metrics.turnDuration.observe(seconds);
}

export function countModelCall(model: string, cls: string): void {
  if (enabledApps > 0) metrics.modelCalls.inc({ model, class: cls });
}

export function countDelivery(channel: string, status: string): void {
  if (enabledApps > 0) metrics.deliveries.inc({ channel, status });
}

export function countCost(agent: string, usd: number | undefined): void {
  if (enabledApps > 0 && usd !== undefined && usd > 0) metrics.costUsd.inc({ agent }, usd);
}

/**
 * The class of a failed call until the failover chain classifies provider errors: an aborted
 * call, a SwitchboardError's code in lower case (rate_limited, timeout, unavailable, …), or
 * "error". A bounded set either way.
 */
export function errorClass(err: unknown): string {
  if (err instanceof Error && err.name === "AbortError") return "aborted";
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string" && /^[A-Z][A-Z_]{1,30}$/.test(code)) return code.toLowerCase();
  return "error";
}
