import { BUILT_IN_SCRIPTED, configModelRefs } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { SwitchboardError } from "../errors.js";
import type { Logger } from "../log.js";
import type { ModelRegistry } from "../services/index.js";
import type { ModelProvider, ModelRequest, ModelResponse } from "../services/models.js";
import type { SessionEntry } from "../store/types.js";
import { countModelCall } from "../telemetry/index.js";
import { DEFAULT_CONTEXT_TOKENS, knownModelFacts } from "./context-window.js";
import {
  type BreakerView,
  type ChainAttempt,
  type ChainDeps,
  type ChainHooks,
  type ChainResult,
  type CircuitBreaker,
  completeOverChain,
  LocalBreaker,
  runChain,
} from "./providers/chain.js";
import type { ModelErrorClass } from "./providers/failure.js";
import { createProvider, isModelAllowed, resolveModelRef } from "./providers/index.js";

export interface ModelsOptions {
  /** The circuit breaker (Redis-backed on bullmq); default in memory. */
  breaker?: CircuitBreaker;
  now?: () => number;
}

/** The demo model used when nothing is configured: scripted, and it says so. */
export const DEMO_MODEL = "scripted/demo";

/** Builds providers from config once; resolves `provider/model` refs; no silent fallback. */
export class ConfiguredModels implements ModelRegistry {
  readonly demo: boolean;
  readonly #providers = new Map<string, ModelProvider>();
  /** `contextTokens` and `maxOutputTokens` by model ref: the config is fixed for this registry. */
  readonly #facts = new Map<string, { contextTokens: number; maxOutputTokens: number | undefined }>();
  readonly #chain: ChainDeps;
  readonly breaker: CircuitBreaker;
  /** Set by telemetry when metrics are on: every model call's outcome. */
  onModelCall: ((ref: string, outcome: ModelErrorClass | "ok") => void) | undefined;

  constructor(
    private readonly config: Config,
    logger: Logger,
    baseDir: string,
    opts: ModelsOptions = {},
  ) {
    const anyModel =
      config.models.default ?? config.agents.defaults.model ?? config.agents.list.find((a) => a.model)?.model;
    this.demo = anyModel === undefined;
    for (const [id, p] of Object.entries(config.models.providers)) {
      this.#providers.set(id, createProvider(id, p, { logger, baseDir, demo: false }));
    }
    // The built-in scripted provider: the demo when no model is configured, else only when a ref
    // in the config names it without declaring it (so it is not offered to `model` overrides).
    const named = configModelRefs(config).some(([, ref]) => ref.startsWith(`${BUILT_IN_SCRIPTED}/`));
    if ((this.demo || named) && !this.#providers.has(BUILT_IN_SCRIPTED)) {
      this.#providers.set(
        BUILT_IN_SCRIPTED,
        createProvider(
          BUILT_IN_SCRIPTED,
          { kind: "scripted", models: {}, timeoutMs: 120_000, maxRetries: 0 },
          // built-in demo rules: its replies say they are scripted, named or not
          { logger, baseDir, demo: true },
        ),
      );
    }
    this.#checkChains();
    this.breaker = opts.breaker ?? new LocalBreaker(config.models.failover, opts.now);
    this.#chain = {
      policy: config.models.failover,
      breaker: this.breaker,
      resolve: (ref) => this.resolve(ref),
      logger: logger.child({ component: "failover" }),
      onModelCall: (ref, outcome) => {
        countModelCall(ref, outcome);
        this.onModelCall?.(ref, outcome);
      },
    };
  }

  /**
   * Every fallback must be a model `model` overrides may name (`models.allowed`): a chain is
   * checked at start, never at the first failure. Providers were checked by the config loader.
   */
  #checkChains(): void {
    const check = (at: string, ref: string) => {
      try {
        this.resolve(ref);
      } catch (err) {
        throw new SwitchboardError("CONFIG", `config: ${at}: ${(err as Error).message}`, {
          details: { path: at, ref },
        });
      }
      if (this.config.models.allowed.length > 0 && !this.isAllowed(ref))
        throw new SwitchboardError(
          "CONFIG",
          `config: ${at}: model "${ref}" is not allowed (models.allowed: ${this.config.models.allowed.join(", ")})`,
          { details: { path: at, ref } },
        );
    };
    for (const [i, ref] of this.config.models.fallbacks.entries()) check(`models.fallbacks.${i}`, ref);
    for (const [i, a] of this.config.agents.list.entries())
      for (const [j, ref] of (a.fallbacks ?? []).entries())
        check(`agents.list.${i}.model.fallbacks.${j}`, ref);
  }

  /**
   * The failover chain of a session (API.md §8.4): the model it uses now, then the agent's own
   * fallbacks, else `models.fallbacks`; each ref once.
   */
  chainFor(agentId: string, entry?: SessionEntry | null, primary?: string): string[] {
    const first = primary ?? this.modelFor(agentId, entry);
    const agent = this.config.agents.list.find((a) => a.id === agentId);
    const rest = agent?.fallbacks ?? this.config.models.fallbacks;
    if (rest.length === 0) return [first];
    const out = [first];
    for (const r of rest) if (!out.includes(r)) out.push(r);
    return out;
  }

  /** One completion over a chain of refs (chain.ts). */
  complete(
    refs: readonly string[],
    req: Omit<ModelRequest, "model" | "noRetry">,
    hooks?: ChainHooks,
  ): Promise<ChainResult<ModelResponse>> {
    return completeOverChain(this.#chain, refs, req, hooks);
  }

  /**
   * Any other model call over a chain (audio transcription, for the media room): `attempt`
   * throws errors carrying `details.class` (see failure.ts `classifyStatus`).
   */
  run<T>(
    refs: readonly string[],
    attempt: (a: ChainAttempt) => Promise<T>,
    opts: { signal?: AbortSignal; hooks?: ChainHooks } = {},
  ): Promise<ChainResult<T>> {
    return runChain(this.#chain, refs, attempt, opts);
  }

  /** Circuit states of every configured ref (and any other that failed), for `health`. */
  circuits(): Promise<Record<string, BreakerView>> {
    const refs = new Set<string>();
    for (const [at, ref] of configModelRefs(this.config)) if (!at.startsWith("models.allowed")) refs.add(ref);
    return this.breaker.snapshot([...refs]);
  }

  get defaultModel(): string {
    return this.config.models.default ?? this.config.agents.defaults.model ?? DEMO_MODEL;
  }

  modelFor(agentId: string, entry?: SessionEntry | null): string {
    const agent = this.config.agents.list.find((a) => a.id === agentId);
    return (
      entry?.model ??
      agent?.model ??
      this.config.agents.defaults.model ??
      this.config.models.default ??
      DEMO_MODEL
    );
  }

  resolve(ref: string): { provider: ModelProvider; model: string; ref: string } {
    const { provider, model } = resolveModelRef(ref);
    const p = this.#providers.get(provider);
    if (!p) {
      const known = [...this.#providers.keys()];
      throw new SwitchboardError(
        "NOT_FOUND",
        `unknown model provider "${provider}" in "${ref}"; configured providers: ${known.join(", ") || "none"} (models.providers)`,
        { details: { field: "model", ref } },
      );
    }
    return { provider: p, model, ref: `${provider}/${model}` };
  }

  isAllowed(ref: string): boolean {
    return isModelAllowed(ref, this.config.models.allowed, [...this.#providers.keys()]);
  }

  /** The model's context window: configured per-model fact, else the family default, else 128k. */
  contextTokens(ref: string): number {
    return this.#factsOf(ref).contextTokens;
  }

  /** The model's output cap: configured, else the family default; undefined when unknown. */
  maxOutputTokens(ref: string): number | undefined {
    return this.#factsOf(ref).maxOutputTokens;
  }

  /** Both figures of a ref, worked out once per ref (a turn asks several times). */
  #factsOf(ref: string): { contextTokens: number; maxOutputTokens: number | undefined } {
    let facts = this.#facts.get(ref);
    if (facts === undefined) {
      try {
        const { provider, model } = resolveModelRef(ref);
        const configured = this.config.models.providers[provider]?.models[model];
        const known = knownModelFacts(model);
        facts = {
          contextTokens: configured?.contextTokens ?? known.contextTokens,
          maxOutputTokens: configured?.maxOutputTokens ?? known.maxOutputTokens,
        };
      } catch {
        facts = { contextTokens: DEFAULT_CONTEXT_TOKENS, maxOutputTokens: undefined };
      }
      // refs come from config and sessions' model overrides (checked against models.allowed): few
      if (this.#facts.size >= 1024) this.#facts.clear();
      this.#facts.set(ref, facts);
    }
    return facts;
  }

  providers(): ModelProvider[] {
    return [...this.#providers.values()];
  }
}
