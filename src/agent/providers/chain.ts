import { RateLimitedError, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { abortableSleep, type Sleep } from "../../retry/index.js";
import {
  type BreakerState,
  type BreakerView,
  type ChainAttempt,
  type ChainHooks,
  type ChainResult,
  type FallbackRecord,
  MODEL_ERROR_CLASSES,
  type ModelErrorClass,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
} from "../../services/models.js";
import { BadAnswerError, classifyFailure } from "./failure.js";

export type { BreakerState, BreakerView, ChainAttempt, ChainHooks, ChainResult, FallbackRecord };

/**
 * The failover chain over the providers (API.md §8.4): a list of `provider/model` refs tried in
 * order, each call made with the provider's own retries off (`noRetry`), every failure classified
 * once (failure.ts put the class on the error, from the raw answer) and acted on here:
 *
 * - `rate_limited`: wait the server's `retry-after` on the same model when it is at most
 *   `maxRetryAfterMs` (once), else the next model;
 * - `server`: one quick retry on the same model (≤ 1 s), then the next;
 * - `overloaded`, `timeout`, `connection`, `empty`, `auth`, `billing`: the next model at once
 *   (`auth`/`billing` also reach `onCredentialProblem`, which tells the owners);
 * - `invalid_request`: the call fails, naming the class (another model would be refused too).
 *
 * A circuit breaker per model skips a model after `failuresToOpen` consecutive failed calls for
 * `cooldownSeconds`, then lets one call through (half-open). Text already streamed by a model that
 * then failed is taken back (`onReset`) before the next one streams: the chat sees one reply.
 */

export interface FailoverPolicy {
  /** Longest server `retry-after` waited out on the same model (ms). */
  maxRetryAfterMs: number;
  /** How long an open circuit skips its model (s). */
  cooldownSeconds: number;
  /** Consecutive failed calls that open a model's circuit. */
  failuresToOpen: number;
}

export type Admission =
  | { go: true; probe: boolean }
  | { go: false; lastClass: ModelErrorClass; until: number };

/** One circuit per model ref; in memory (local queue) or in Redis (bullmq, shared by every worker). */
export interface CircuitBreaker {
  admit(ref: string): Promise<Admission> | Admission;
  success(ref: string): Promise<void> | void;
  failure(ref: string, cls: ModelErrorClass, probe: boolean): Promise<void> | void;
  /** The state of each ref (closed when nothing is known), for `health`. */
  snapshot(refs: readonly string[]): Promise<Record<string, BreakerView>>;
}

interface LocalCircuit {
  failures: number;
  openUntil: number;
  lastClass: ModelErrorClass;
  /** While half-open: when the one probe started (0: none out). */
  probeAt: number;
}

/** The in-process breaker (local queue driver: one process runs every turn). */
export class LocalBreaker implements CircuitBreaker {
  readonly #circuits = new Map<string, LocalCircuit>();

  constructor(
    private readonly policy: FailoverPolicy,
    private readonly now: () => number = Date.now,
  ) {}

  admit(ref: string): Admission {
    const c = this.#circuits.get(ref);
    if (c === undefined || c.openUntil === 0) return GO;
    const now = this.now();
    if (now < c.openUntil) return { go: false, lastClass: c.lastClass, until: c.openUntil };
    // half-open: one probe at a time (a probe whose caller vanished frees the slot after a cooldown)
    if (c.probeAt > 0 && now - c.probeAt < this.policy.cooldownSeconds * 1000)
      return { go: false, lastClass: c.lastClass, until: c.probeAt + this.policy.cooldownSeconds * 1000 };
    c.probeAt = now;
    return PROBE;
  }

  success(ref: string): void {
    if (this.#circuits.size > 0) this.#circuits.delete(ref);
  }

  failure(ref: string, cls: ModelErrorClass, probe: boolean): void {
    let c = this.#circuits.get(ref);
    if (c === undefined) {
      c = { failures: 0, openUntil: 0, lastClass: cls, probeAt: 0 };
      this.#circuits.set(ref, c);
    }
    c.failures++;
    c.lastClass = cls;
    if (probe || c.failures >= this.policy.failuresToOpen) {
      c.openUntil = this.now() + this.policy.cooldownSeconds * 1000;
      c.probeAt = 0;
    }
  }

  async snapshot(refs: readonly string[]): Promise<Record<string, BreakerView>> {
    const out: Record<string, BreakerView> = {};
    const now = this.now();
    for (const ref of new Set([...refs, ...this.#circuits.keys()])) {
      const c = this.#circuits.get(ref);
      out[ref] =
        c === undefined
          ? { state: "closed", failures: 0 }
          : viewOf(c.failures, c.openUntil, c.lastClass, now);
    }
    return out;
  }
}

const GO: Admission = { go: true, probe: false };
const PROBE: Admission = { go: true, probe: true };

export function viewOf(
  failures: number,
  openUntil: number,
  lastClass: ModelErrorClass | undefined,
  now: number,
): BreakerView {
  const state: BreakerState = openUntil === 0 ? "closed" : now < openUntil ? "open" : "half_open";
  return {
    state,
    failures,
    ...(openUntil > 0 ? { openUntil } : {}),
    ...(lastClass ? { lastClass } : {}),
  };
}

const CLASS_SET: ReadonlySet<string> = new Set(MODEL_ERROR_CLASSES);

export function isModelErrorClass(v: unknown): v is ModelErrorClass {
  return typeof v === "string" && CLASS_SET.has(v);
}

/** A 200 with no text and no tool call: nothing to show, nothing to run. */
export class EmptyAnswerError extends Error {
  constructor(ref: string) {
    super(`model ${ref} answered with no text and no tool call`);
    this.name = "EmptyAnswerError";
  }
}

/** The class of a failed call: the one the provider put on its error, else from what was thrown. */
export function classOf(err: unknown): ModelErrorClass {
  if (err instanceof EmptyAnswerError) return "empty";
  if (err instanceof BadAnswerError) return classifyFailure(err.failure);
  if (err instanceof SwitchboardError) {
    const cls = err.details?.class;
    if (isModelErrorClass(cls)) return cls;
    switch (err.code) {
      case "RATE_LIMITED":
        return "rate_limited";
      case "UNAUTHORIZED":
      case "FORBIDDEN":
        return "auth";
      case "TIMEOUT":
        return "timeout";
      case "UNAVAILABLE":
        return "connection";
      case "INVALID_PARAMS":
      case "NOT_FOUND":
        return "invalid_request";
      default:
        return "server";
    }
  }
  // anything else a provider threw (a parse error deep in an SDK): the server's answer was bad
  return "server";
}

/** Every model of a chain failed (or the last failure may not move on: invalid_request). */
export class ChainFailedError extends SwitchboardError {
  constructor(
    message: string,
    readonly modelClass: ModelErrorClass,
    readonly fallbacks: FallbackRecord[],
    cause?: unknown,
  ) {
    super(modelClass === "invalid_request" ? "INVALID_PARAMS" : "UNAVAILABLE", message, {
      details: { class: modelClass, fallbacks },
      cause,
    });
    this.name = "ChainFailedError";
  }
}

/** The most a `server` failure's quick retry waits (ms), and the least. */
const QUICK_RETRY_MS = 1000;
const QUICK_RETRY_MIN_MS = 100;

export interface ChainDeps {
  policy: FailoverPolicy;
  breaker: CircuitBreaker;
  resolve(ref: string): { provider: ModelProvider; model: string; ref: string };
  logger: Logger;
  sleep?: Sleep;
  random?: () => number;
  /**
   * Hook for metrics (`switchboard_model_calls_total{model,class}`): every call's outcome,
   * `"ok"` on success.
   */
  onModelCall?: (ref: string, outcome: ModelErrorClass | "ok") => void;
  /** `auth`/`billing`: the key of `ref`'s provider needs a person (the owners are told, throttled). */
  onCredentialProblem?: (ref: string, cls: "auth" | "billing", providerId: string) => void;
}

/**
 * Runs `attempt` over `refs` with the rules above. Generic, so calls other than chat completions
 * (audio transcription) go through the same chain: `attempt` throws errors `classOf` can read
 * (a SwitchboardError with `details.class`, as the providers' are) and returns `streamed()` > 0
 * when it already handed text on.
 */
export async function runChain<T>(
  deps: ChainDeps,
  refs: readonly string[],
  attempt: (a: ChainAttempt) => Promise<T>,
  opts: { signal?: AbortSignal; hooks?: ChainHooks; streamed?: () => number } = {},
): Promise<ChainResult<T>> {
  const { policy, breaker } = deps;
  const sleep = deps.sleep ?? abortableSleep;
  const fallbacks: FallbackRecord[] = [];
  let last: { cls: ModelErrorClass; err: unknown } | undefined;
  const moveOn = (i: number, f: FallbackRecord) => {
    fallbacks.push(f);
    opts.hooks?.onFallback?.(f, refs[i + 1]);
  };
  for (let i = 0; i < refs.length; i++) {
    const ref = refs[i]!;
    const target = deps.resolve(ref);
    const admission = await breaker.admit(ref);
    if (!admission.go) {
      last ??= { cls: admission.lastClass, err: undefined };
      moveOn(i, { model: ref, class: admission.lastClass, skipped: true });
      continue;
    }
    let retried = false;
    for (;;) {
      const before = opts.streamed?.() ?? 0;
      try {
        const result = await attempt({ target, probe: admission.probe, last: i === refs.length - 1 });
        deps.onModelCall?.(ref, "ok");
        await breaker.success(ref);
        return { result, ref, fallbacks };
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason ?? err;
        const cls = classOf(err);
        deps.onModelCall?.(ref, cls);
        // what this model streamed is void: the next answer (same model or not) replaces it
        if ((opts.streamed?.() ?? 0) > before) opts.hooks?.onReset?.();
        if (cls === "invalid_request") {
          throw new ChainFailedError(
            `model ${ref} refused the request (invalid_request): ${errorText(err)}`,
            cls,
            fallbacks,
            err,
          );
        }
        const wait = retried ? undefined : sameModelWait(cls, err, policy, deps.random ?? Math.random);
        if (wait !== undefined) {
          retried = true;
          deps.logger.info(
            { ref, class: cls, waitMs: Math.round(wait) },
            "model call failed; retrying the same model",
          );
          await sleep(wait, opts.signal);
          continue;
        }
        last = { cls, err };
        await breaker.failure(ref, cls, admission.probe);
        if ((cls === "auth" || cls === "billing") && deps.onCredentialProblem)
          deps.onCredentialProblem(ref, cls, target.provider.id);
        deps.logger.warn(
          { ref, class: cls, next: refs[i + 1] ?? null, err: errorText(err) },
          refs[i + 1]
            ? "model call failed; falling back to the next model"
            : "model call failed; no model left",
        );
        moveOn(i, { model: ref, class: cls });
        break;
      }
    }
  }
  const cls = last?.cls ?? "server";
  const tried = fallbacks
    .map((f) => `${f.model} (${f.class}${f.skipped ? ", circuit open" : ""})`)
    .join(", ");
  throw new ChainFailedError(
    `no model answered (${cls}): ${tried}${last?.err ? `; last error: ${errorText(last.err)}` : ""}`,
    cls,
    fallbacks,
    last?.err,
  );
}

/** How long to wait before the same model again, or undefined to move on. */
function sameModelWait(
  cls: ModelErrorClass,
  err: unknown,
  policy: FailoverPolicy,
  random: () => number,
): number | undefined {
  if (cls === "rate_limited") {
    const told = err instanceof RateLimitedError ? err.details?.serverRetryAfterMs : undefined;
    return typeof told === "number" && told <= policy.maxRetryAfterMs ? told : undefined;
  }
  if (cls === "server") return QUICK_RETRY_MIN_MS + random() * (QUICK_RETRY_MS / 4 - QUICK_RETRY_MIN_MS);
  return undefined;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * One chat completion over the chain: each model called with its own retries off, a reply with
 * no text and no tool call counted as a failure (`empty`), streamed text taken back before the
 * next model answers.
 */
export function completeOverChain(
  deps: ChainDeps,
  refs: readonly string[],
  req: Omit<ModelRequest, "model" | "noRetry">,
  hooks: ChainHooks = {},
): Promise<ChainResult<ModelResponse>> {
  let streamed = 0;
  const onTextDelta = req.onTextDelta;
  return runChain(
    deps,
    refs,
    async ({ target, last }) => {
      const res = await target.provider.complete({
        ...req,
        model: target.model,
        noRetry: true,
        ...(onTextDelta
          ? {
              onTextDelta: (d: string) => {
                streamed += d.length;
                onTextDelta(d);
              },
            }
          : {}),
      });
      // Empty moves on while a model is left; the last model's empty answer is the answer (an
      // agent may end an exchange with nothing to say: SEMANTICS, the reply-back loop).
      if (!last && res.toolCalls.length === 0 && res.text.trim() === "")
        throw new EmptyAnswerError(target.ref);
      return res;
    },
    { ...(req.signal ? { signal: req.signal } : {}), hooks, streamed: () => streamed },
  );
}
