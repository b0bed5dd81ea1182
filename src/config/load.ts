import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import JSON5 from "json5";
import type { z } from "zod";
import { formatIssues, SwitchboardError } from "../errors.js";
import { type Config, configSchema } from "./schema.js";

/**
 * Config loading: discovery (`--config`, `$SWITCHBOARD_CONFIG`, `./switchboard.json5`, defaults),
 * JSON5 parsing, `${VAR}` substitution, zod validation. The only place that reads `process.env`
 * for configuration.
 */

export interface LoadedConfig {
  config: Config;
  /** The file it came from, or null for built-in defaults. */
  source: string | null;
  /** Directory relative paths in the config resolve against. */
  baseDir: string;
}

export interface LoadOptions {
  file?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * For commands that only read (the CLI's client commands): a missing `${VAR}` under
   * `models.` or `channels.` — model keys, bot tokens the command never uses — stays as written
   * instead of failing. Everywhere else a missing variable is still an error.
   */
  readOnly?: boolean;
}

/** Config paths whose secrets a read-only command never needs. */
const READ_ONLY_LENIENT = ["models.", "channels."];

export function discoverConfigFile(opts: LoadOptions = {}): string | null {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  if (opts.file) return path.resolve(cwd, opts.file);
  if (env.SWITCHBOARD_CONFIG) return path.resolve(cwd, env.SWITCHBOARD_CONFIG);
  const local = path.resolve(cwd, "switchboard.json5");
  return existsSync(local) ? local : null;
}

/** Replace `${VAR}` in every string; a missing variable is an error naming the path and the variable. */
export function substituteEnv(
  value: unknown,
  env: NodeJS.ProcessEnv,
  at: string[] = [],
  lenient: readonly string[] = [],
): unknown {
  if (typeof value === "string") {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (m, name: string) => {
      const v = env[name];
      if (v === undefined) {
        const where = `${at.join(".")}.`;
        if (lenient.some((p) => where.startsWith(p))) return m;
        throw new SwitchboardError(
          "CONFIG",
          `config: ${at.join(".") || "(root)"}: environment variable ${name} is not set`,
          { details: { path: at.join("."), variable: name } },
        );
      }
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => substituteEnv(v, env, [...at, String(i)], lenient));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = substituteEnv(v, env, [...at, k], lenient);
    return out;
  }
  return value;
}

/** An unknown key is named by its own path (`gateway.prot`), not its parent's: one issue per key. */
function keyIssues(issue: z.core.$ZodIssue): Array<{ path: PropertyKey[]; message: string }> {
  if (issue.code !== "unrecognized_keys") return [issue];
  return issue.keys.map((k) => ({ path: [...issue.path, k], message: `Unrecognized key "${k}"` }));
}

/** Validate a raw (already parsed) config object. Throws a CONFIG error listing every bad path. */
export function parseConfig(
  raw: unknown,
  env: NodeJS.ProcessEnv = process.env,
  opts: { readOnly?: boolean } = {},
): Config {
  const substituted = substituteEnv(raw ?? {}, env, [], opts.readOnly ? READ_ONLY_LENIENT : []);
  const result = configSchema.safeParse(substituted);
  if (!result.success) {
    const issues = result.error.issues.flatMap(keyIssues);
    throw new SwitchboardError("CONFIG", formatIssues(issues, "config: "), {
      details: { issues: issues.map((i) => ({ path: i.path.join("."), message: i.message })) },
    });
  }
  const config = result.data;
  const ids = new Set<string>();
  for (const [i, a] of config.agents.list.entries()) {
    if (ids.has(a.id))
      throw new SwitchboardError("CONFIG", `config: agents.list.${i}.id: duplicate agent id "${a.id}"`);
    ids.add(a.id);
  }
  if (config.agents.list.length === 0) {
    throw new SwitchboardError("CONFIG", "config: agents.list: at least one agent is required");
  }
  for (const [i, b] of config.bindings.entries()) {
    if (!ids.has(b.agentId)) {
      throw new SwitchboardError(
        "CONFIG",
        `config: bindings.${i}.agentId: no agent "${b.agentId}" in agents.list`,
      );
    }
  }
  checkModelRefs(config);
  return config;
}

/**
 * The provider name a `scripted/<model>` ref may use without declaring it: the built-in scripted
 * provider with the demo rules, so the documented default `"scripted/demo"` (API.md §3) can be
 * written out. A provider configured under this name replaces it.
 */
export const BUILT_IN_SCRIPTED = "scripted";

/**
 * Every model reference the config makes, with its path. Optional keys other sections add (a
 * sub-agent's or a cron job's model, compaction's) are read loosely so this covers them when present.
 */
export function configModelRefs(config: Config): Array<[string, string]> {
  const refs: Array<[string, unknown]> = [["models.default", config.models.default]];
  const loose = (v: unknown): Record<string, unknown> =>
    v && typeof v === "object" ? (v as Record<string, unknown>) : {};
  const defaults = loose(config.agents.defaults);
  refs.push(["agents.defaults.model", defaults.model]);
  refs.push(["agents.defaults.subagents.model", loose(defaults.subagents).model]);
  refs.push(["agents.defaults.compaction.model", loose(defaults.compaction).model]);
  for (const [i, f] of config.models.fallbacks.entries()) refs.push([`models.fallbacks.${i}`, f]);
  for (const [i, a] of config.agents.list.entries()) {
    refs.push([a.fallbacks ? `agents.list.${i}.model.primary` : `agents.list.${i}.model`, a.model]);
    for (const [j, f] of (a.fallbacks ?? []).entries())
      refs.push([`agents.list.${i}.model.fallbacks.${j}`, f]);
    refs.push([`agents.list.${i}.subagents.model`, loose(a.subagents).model]);
  }
  const jobs = loose(loose(config).cron).jobs;
  if (Array.isArray(jobs))
    for (const [i, j] of jobs.entries()) refs.push([`cron.jobs.${i}.model`, loose(j).model]);
  for (const [i, a] of config.models.allowed.entries()) refs.push([`models.allowed.${i}`, a]);
  return refs.filter((r): r is [string, string] => typeof r[1] === "string");
}

/**
 * Every model reference must name a configured provider (`models.providers`) or the built-in
 * scripted one, or the gateway would start and fail at the first message.
 */
function checkModelRefs(config: Config): void {
  const providers = Object.keys(config.models.providers);
  for (const [at, ref] of configModelRefs(config)) {
    const provider = ref.split("/")[0] ?? "";
    if (provider === "*" || provider === BUILT_IN_SCRIPTED || providers.includes(provider)) continue;
    throw new SwitchboardError(
      "CONFIG",
      `config: ${at}: unknown model provider "${provider}" in "${ref}"; configured providers: ${providers.join(", ") || "none"} (models.providers)`,
      { details: { path: at, ref } },
    );
  }
}

export function loadConfig(opts: LoadOptions = {}): LoadedConfig {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const file = discoverConfigFile(opts);
  const parseOpts = { readOnly: opts.readOnly === true };
  if (!file) return { config: parseConfig({}, env, parseOpts), source: null, baseDir: cwd };
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new SwitchboardError(
      "CONFIG",
      `config: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`,
    );
  }
  let raw: unknown;
  try {
    raw = JSON5.parse(text);
  } catch (err) {
    throw new SwitchboardError("CONFIG", `config: ${file}: not valid JSON5: ${(err as Error).message}`);
  }
  return { config: parseConfig(raw, env, parseOpts), source: file, baseDir: path.dirname(file) };
}

/** Log level from the environment, for the CLI (env is read only in this folder). */
export function envLogLevel(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env.SWITCHBOARD_LOG_LEVEL;
}
