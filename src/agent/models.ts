import { BUILT_IN_SCRIPTED, configModelRefs } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { SwitchboardError } from "../errors.js";
import type { Logger } from "../log.js";
import type { ModelRegistry } from "../services/index.js";
import type { ModelProvider } from "../services/models.js";
import type { SessionEntry } from "../store/types.js";
import { DEFAULT_CONTEXT_TOKENS, knownModelFacts } from "./context-window.js";
import { createProvider, isModelAllowed, resolveModelRef } from "./providers/index.js";

/** The demo model used when nothing is configured: scripted, and it says so. */
export const DEMO_MODEL = "scripted/demo";

/** Builds providers from config once; resolves `provider/model` refs; no silent fallback. */
export class ConfiguredModels implements ModelRegistry {
  readonly demo: boolean;
  readonly #providers = new Map<string, ModelProvider>();
  /** `contextTokens` and `maxOutputTokens` by model ref: the config is fixed for this registry. */
  readonly #facts = new Map<string, { contextTokens: number; maxOutputTokens: number | undefined }>();

  constructor(
    private readonly config: Config,
    logger: Logger,
    baseDir: string,
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
