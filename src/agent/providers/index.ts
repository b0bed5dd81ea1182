import path from "node:path";
import type { ProviderConfig } from "../../config/schema.js";
import { InvalidParamsError, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import type { ModelProvider, ModelRequest, ModelResponse } from "../../services/models.js";
import type { Usage } from "../../store/types.js";
import { createScriptedProvider } from "./scripted.js";

/**
 * The providers folder's public surface: build a provider from config, and the model-ref,
 * allow-list and pricing helpers the runtime, tools and status cards share.
 */

export type * from "../../services/models.js";
export type { AnthropicProviderConfig } from "./anthropic.js";
export type { OpenAIProviderConfig } from "./openai.js";
export type { CallTuning, RetryPolicy } from "./retry.js";
export {
  createScriptedProvider,
  DEMO_MARKER,
  type ScriptedOptions,
  type ScriptedProviderConfig,
} from "./scripted.js";
export { DEMO_HELP, DEMO_RULES, type ScriptRule, scriptRuleSchema } from "./scripted-rules.js";

export interface ProviderContext {
  logger: Logger;
  /** Directory relative paths in config (a scripted `script`) resolve against. */
  baseDir: string;
  /** No real model is configured: the scripted provider announces itself as the demo model. */
  demo?: boolean;
}

/**
 * A provider whose module is loaded on first use: a gateway that never calls a model of a kind
 * never pays its start-up time and memory (the openai and anthropic SDKs are ~15-25 MB each; the
 * openai provider's completions do not use its SDK at all, only its first `ping` loads it).
 */
function lazyProvider(
  id: string,
  kind: "openai" | "anthropic",
  load: () => Promise<ModelProvider>,
): ModelProvider {
  let loaded: Promise<ModelProvider> | undefined;
  const get = () => {
    loaded ??= load();
    return loaded;
  };
  return {
    id,
    kind,
    async complete(req: ModelRequest): Promise<ModelResponse> {
      return (await get()).complete(req);
    },
    async ping() {
      const p = await get();
      return p.ping ? p.ping() : { ok: true, message: "no reachability check for this provider" };
    },
  };
}

export function createProvider(id: string, cfg: ProviderConfig, ctx: ProviderContext): ModelProvider {
  switch (cfg.kind) {
    case "openai":
      return lazyProvider(id, "openai", async () =>
        (await import("./openai.js")).createOpenAIProvider(id, cfg, ctx.logger),
      );
    case "anthropic":
      if (!cfg.apiKey) {
        // Checked at start, not at the first call: a missing key is a config error.
        throw new SwitchboardError(
          "CONFIG",
          `config: models.providers.${id}.apiKey: required for kind "anthropic" (e.g. "\${ANTHROPIC_API_KEY}")`,
          { details: { path: `models.providers.${id}.apiKey` } },
        );
      }
      return lazyProvider(id, "anthropic", async () =>
        (await import("./anthropic.js")).createAnthropicProvider(id, cfg, ctx.logger),
      );
    case "scripted":
      return createScriptedProvider(id, cfg, ctx.logger, {
        demo: ctx.demo ?? false,
        ...(cfg.script ? { scriptPath: path.resolve(ctx.baseDir, cfg.script) } : {}),
      });
  }
}

/** `"<provider>/<model>"`, split at the first "/" (model names may contain more slashes). */
export function resolveModelRef(ref: string): { provider: string; model: string } {
  const i = ref.indexOf("/");
  const provider = i > 0 ? ref.slice(0, i) : "";
  const model = i > 0 ? ref.slice(i + 1) : "";
  if (!provider || !model || /\s/.test(provider) || /^\s|\s$/.test(model)) {
    throw new InvalidParamsError(
      `model "${ref}" must look like "<provider>/<model>", e.g. "openai/gpt-4.1"`,
      {
        field: "model",
        ref,
      },
    );
  }
  return { provider, model };
}

function globToRegExp(glob: string): RegExp {
  const body = glob.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${body.join(".*")}$`);
}

/**
 * May a `model` override name `ref`? Only refs of a configured provider ever are. With an empty
 * `allowed`, any model of a configured provider is; otherwise an entry must equal the ref or
 * match it as a glob (`local/*`, `openai/gpt-4*`).
 */
export function isModelAllowed(
  ref: string,
  allowed: readonly string[],
  configuredProviders: readonly string[],
): boolean {
  let provider: string;
  try {
    provider = resolveModelRef(ref).provider;
  } catch {
    return false;
  }
  if (!configuredProviders.includes(provider)) return false;
  if (allowed.length === 0) return true;
  return allowed.some((entry) => (entry.includes("*") ? globToRegExp(entry).test(ref) : entry === ref));
}

/** USD per million tokens, as in `models.providers.<id>.models.<model>.price`. */
export type ModelPrice = NonNullable<ProviderConfig["models"][string]["price"]>;

/** The configured price of `<provider>/<model>` (`models.providers.<p>.models.<m>.price`), if any. */
export function priceOf(providers: Record<string, ProviderConfig>, ref: string): ModelPrice | undefined {
  const { provider, model } = resolveModelRef(ref);
  return providers[provider]?.models[model]?.price;
}

/** A copy of `usage` with `cost` in USD; unchanged (no cost) when the model has no price. */
export function priceUsage(usage: Usage, price?: ModelPrice): Usage {
  if (!price) return usage;
  const cost =
    (usage.input * price.inputPerMTok +
      usage.output * price.outputPerMTok +
      (usage.cacheRead ?? 0) * price.cacheReadPerMTok +
      (usage.cacheWrite ?? 0) * price.cacheWritePerMTok) /
    1_000_000;
  // Rounded to a millionth of a cent: float noise would otherwise show in status cards.
  return { ...usage, cost: Math.round(cost * 1e8) / 1e8 };
}
