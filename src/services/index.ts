import type { ChannelAdapter, OutboundAction } from "../channels/types.js";
import type { Config } from "../config/schema.js";
import type { EventBus } from "../events.js";
import type { Logger } from "../log.js";
import type { MediaStore } from "../media/types.js";
import type { Pipeline } from "../pipeline/types.js";
import type { SessionEntry, StoreDriver } from "../store/types.js";
import type { CronJobs } from "./cron.js";
import type {
  BreakerView,
  ChainAttempt,
  ChainHooks,
  ChainResult,
  ModelProvider,
  ModelRequest,
  ModelResponse,
} from "./models.js";

/**
 * The services bag handed down from the composition root (`src/app/`) to the runtime, the
 * tools and the RPC methods. Everything is an interface; nothing here picks a driver.
 */

/** Who a turn is for, as budgets match it (API.md §8.4). */
export interface UsageContext {
  agentId: string;
  sessionKey: string;
  channel?: string;
  /** The model that answered (counted per model; budgets do not match on it). */
  model?: string;
}

/** One scope's totals this period (`usage.get`, `usage.list`, API.md §8.4). */
export interface UsageTotalsView {
  costUsd: number;
  tokens: { input: number; output: number };
  runs: number;
}

/** A model call's budget reservation (src/usage/admission.ts), settled after the call. */
export interface UsageTicket {
  ctx: UsageContext;
  /** What the ledger reserved (src/usage/ledger.ts `Reservation`); null: no budget applies to the turn. */
  reservation: {
    id: string;
    at: number;
    limits: ReadonlyArray<{
      scope: string;
      period: "day" | "month";
      maxCostUsd: number | null;
      maxTokens: number | null;
    }>;
  } | null;
}

/** A model call about to be made, as budgets reserve for it. */
export interface UsageCall {
  runId: string;
  /** The call's place in its run (0: the first, which takes over the turn's holds). */
  index: number;
  /** The failover chain: any of its models may answer. */
  chain: readonly string[];
  promptTokens: number;
  /** The runs the turn answers, whose admission holds the first call takes over. */
  takesOver?: readonly string[];
}

/** Spending limits (`usage.budgets`) and the usage counts (src/usage/). */
export interface UsageBudgets {
  /**
   * Admits a new turn (run `runId`): the BUDGET_EXCEEDED error when a matching `block` budget's
   * settled + reserved spend has reached its limit, else null, the turn holding its first model
   * call's expected cost. `entry` (the session, read only when a budget applies) sizes the prompt.
   */
  admit(
    ctx: UsageContext,
    turn: { runId: string; text: string; entry?: () => Promise<SessionEntry | null> },
  ): Promise<Error | null>;
  /**
   * Gives back the holds admitted runs still have (their first model call takes them over), in the
   * period each was reserved in: once a run's turn is over, or when it was not submitted after all.
   */
  release(runIds: readonly string[]): Promise<void>;
  /**
   * Before a model call: reserves its expected cost (a call over `chain` with a prompt of
   * `promptTokens`), or throws BUDGET_EXCEEDED. The turn's first call takes over its runs' holds.
   */
  reserve(ctx: UsageContext, call: UsageCall): Promise<UsageTicket>;
  /** After the call: its real spend (zero when it failed) replaces the reservation. */
  settle(ticket: UsageTicket, actual: { costUsd: number; tokens: number }): Promise<void>;
  /** A scope's totals this period (`global`, `agent:<id>`, `session:<key>`, `channel:<name>`, `model:<ref>`). */
  get(
    scope: string,
    period: "day" | "month",
  ): Promise<UsageTotalsView & { budget?: Record<string, unknown> }>;
  /** One row per agent / session / channel / model this period. */
  list(
    period: "day" | "month",
    by: "agent" | "session" | "channel" | "model",
  ): Promise<Array<UsageTotalsView & { key: string }>>;
  /** Rows per UTC day (`day`: `2026-12-06`) for the last `days` days, and every configured budget. */
  daily(
    by: "agent" | "session" | "channel" | "model",
    days: number,
  ): Promise<{
    rows: Array<UsageTotalsView & { key: string; day: string }>;
    budgets: Array<Record<string, unknown>>;
  }>;
  /**
   * Adds a finished turn's real cost and tokens (a run), or a compaction's model call (`run: false`:
   * its cost and tokens only; as a turn's calls, it was settled in the budgets already).
   */
  record(
    ctx: UsageContext,
    usage: { cost?: number; input: number; output: number },
    opts?: { run?: boolean },
  ): void;
}

export interface ModelRegistry {
  /** `provider/model` → provider + bare model name. Throws INVALID_PARAMS / NOT_FOUND with a clear message. */
  resolve(ref: string): { provider: ModelProvider; model: string; ref: string };
  /** The model a session uses now: session override, agent model, defaults, models.default, scripted demo. */
  modelFor(agentId: string, entry?: SessionEntry | null): string;
  /** Whether a `model` override may name `ref` (configured provider and `models.allowed`). */
  isAllowed(ref: string): boolean;
  /** true when no real model is configured and the scripted demo answers. */
  readonly demo: boolean;
  contextTokens(ref: string): number;
  /** Output cap of the model (configured, else a known family's), when known. */
  maxOutputTokens?(ref: string): number | undefined;
  /**
   * The failover chain (API.md §8.4): `primary` (default: the session's model), then the agent's
   * own fallbacks, else `models.fallbacks`.
   */
  chainFor(agentId: string, entry?: SessionEntry | null, primary?: string): string[];
  /** One completion over a chain: retries, failover, circuit breakers (agent/providers/chain.ts). */
  complete(
    refs: readonly string[],
    req: Omit<ModelRequest, "model" | "noRetry">,
    hooks?: ChainHooks,
  ): Promise<ChainResult<ModelResponse>>;
  /** Any other model call (audio transcription) over a chain. */
  run<T>(
    refs: readonly string[],
    attempt: (a: ChainAttempt) => Promise<T>,
    opts?: { signal?: AbortSignal; hooks?: ChainHooks },
  ): Promise<ChainResult<T>>;
  /** Circuit breaker state per model ref (`health.models`). */
  circuits(): Promise<Record<string, BreakerView>>;
}

export interface ChannelRegistry {
  get(channel: string, accountId?: string): ChannelAdapter | undefined;
  all(): ChannelAdapter[];
}

export interface DeliveryRequest {
  /** Session whose chat receives the text (its delivery context is used). */
  sessionKey: string;
  text: string;
  /** Idempotency key: the same key is never posted twice. */
  idempotencyKey: string;
  /** Explicit route (thread kept); defaults to the entry's delivery context. */
  route?: { channel: string; to: string; accountId?: string; threadId?: string };
  /** Skip the send policy (owner command confirmations). */
  bypassPolicy?: boolean;
  /** `failure`: a failed turn's line to the person (rendered as an error where the chat can). */
  kind?: "reply" | "failure";
  /**
   * Buttons under the (last chunk of the) message where the channel has them
   * (`capabilities.buttons`); elsewhere `actionsFallback` is appended to the text instead.
   */
  actions?: OutboundAction[];
  actionsFallback?: string;
  /**
   * W3C traceparent of the span that asks (a turn's, a tool call's; telemetry/trace.ts): the
   * delivery span is its child, also on the gateway that takes a worker's hand-off. Without one
   * the delivery span is a root.
   */
  traceparent?: string | undefined;
  /**
   * Stored files to send with `text` as their caption (API.md §8.2), resolved from the media store
   * right before the send; one outbox key for them, so a retry never posts them twice.
   */
  attachments?: Array<{ mediaId: string; name?: string; voice?: boolean }>;
}

/** Replaces the text of a message delivery posted (and its buttons: `actions: []` removes them). */
export interface DeliveryEdit {
  route: { channel: string; to: string; accountId?: string; threadId?: string };
  messageId: string;
  text: string;
  actions?: OutboundAction[];
}

/** How one turn streams: whether the model is asked to stream, and who else hears the deltas. */
export interface TurnStreaming {
  /**
   * false: the provider is called without streaming and no `run.delta` is emitted. Default true:
   * streamed when `onDelta` is set or someone watches `run.delta` on the bus.
   */
  enabled?: boolean;
  /** Called with each delta after the bus event (a channel's streaming editor). */
  onDelta?: (text: string) => void;
  /** A tool step began after text had streamed: that text was a preamble, not the reply. */
  onReset?: () => void;
}

/** A reply streamed into the chat as an edited preview (src/delivery/stream.ts). */
export interface ReplyStream {
  /** Appends streamed text; the preview is edited at the channel's bounded rate. */
  push(delta: string): void;
  /** The text so far was a tool-step preamble: the preview restarts from empty. */
  reset(): void;
  /** The final text: the preview becomes exactly it (more chunks are posted when it is long). */
  finish(text: string): Promise<DeliveryOutcome>;
  /** Stops editing, leaving the preview as it is (a failed or aborted turn). */
  close(): Promise<void>;
}

export type DeliveryOutcome =
  | { status: "sent"; channel: string; messageIds: string[] }
  | { status: "duplicate" }
  | { status: "blocked"; reason: string }
  /** `missingChannel`: the route names a channel this process does not run (a worker's). */
  | { status: "no-route"; reason: string; missingChannel?: string }
  /** A process without the channel queued it for a gateway (src/delivery/handoff.ts). */
  | { status: "handed-off"; channel: string }
  | { status: "failed"; error: string };

/**
 * `session`: the row of `req.sessionKey` when the caller has just read it (a turn reads its
 * session once): its route and send policy are used as they are, without reading it again.
 */
export interface Delivery {
  deliver(req: DeliveryRequest, session?: SessionEntry): Promise<DeliveryOutcome>;
  /**
   * A streaming preview for the session's chat, or null when the channel does not edit, its
   * `streaming` is not "partial", there is no route, or the send policy denies.
   */
  openStream?(
    req: Pick<DeliveryRequest, "sessionKey" | "idempotencyKey" | "traceparent">,
    session?: SessionEntry,
  ): Promise<ReplyStream | null>;
  /** Edits a posted message where this process runs its channel; false when it cannot. */
  edit?(req: DeliveryEdit): Promise<boolean>;
}

/** The tools a session may use as `tools.list` reports them (MCP tools with their server): `/tools`. */
export interface ToolCatalog {
  /** For the session of `entry` (its agent, depth and sandbox). */
  report(entry: SessionEntry): Promise<{
    tools: Array<{ name: string; server?: string }>;
    removed: Array<{ name: string; by: string; reason: string }>;
  }>;
}

export interface Services {
  config: Config;
  /** Relative paths in the config resolve against this. */
  baseDir: string;
  stateDir: string;
  logger: Logger;
  store: StoreDriver;
  pipeline: Pipeline;
  bus: EventBus;
  models: ModelRegistry;
  channels: ChannelRegistry;
  delivery: Delivery;
  version: string;
  now(): number;
  /** Spending limits and usage counts (absent in tests that build services by hand). */
  usage?: UsageBudgets;
  /** Cron jobs (absent when `cron.enabled` is false). */
  cron?: CronJobs;
  /** The media store (API.md §8.1; absent in tests that build services by hand). */
  media?: MediaStore;
  /** The tool registry's report (set by the app; MCP tools need their servers started). */
  toolCatalog?: ToolCatalog;
}
