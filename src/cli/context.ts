import path from "node:path";
import { Option } from "commander";
import { type LoadedConfig, loadConfig } from "../config/load.js";
import { SwitchboardError } from "../errors.js";
import { RpcClient } from "../gateway/client.js";
import { readGatewayInfo, readGatewayToken } from "../gateway/token.js";

/** What every command gets: where to print, and how to set the exit code. */
export interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
  /** stdout is a terminal: `start` then shows a banner and short log lines instead of JSON. */
  isTTY?: boolean;
}

export interface CliContext {
  io: Io;
  setCode: (n: number) => void;
}

export const defaultIo: Io = {
  out: (s) => process.stdout.write(s.endsWith("\n") ? s : `${s}\n`),
  err: (s) => process.stderr.write(s.endsWith("\n") ? s : `${s}\n`),
  isTTY: process.stdout.isTTY === true,
};

/** Options shared by several commands (a fresh instance per command). */
export const configOpt = () =>
  new Option(
    "-c, --config <file>",
    "config file (JSON5); default $SWITCHBOARD_CONFIG, then ./switchboard.json5",
  );
export const urlOpt = () =>
  new Option(
    "--url <url>",
    "gateway URL; default from config gateway.url, then <stateDir>/gateway.json, then http://host:port",
  );
export const tokenOpt = () =>
  new Option(
    "--token <token>",
    "bearer token; default from config gateway.auth.token, then <stateDir>/gateway.token",
  );
export const jsonOpt = () => new Option("--json", "print machine-readable JSON");

export interface ClientOpts {
  url?: string;
  config?: string;
  token?: string;
}

export function load(file: string | undefined): LoadedConfig {
  return loadConfig(file ? { file } : {});
}

/** For commands that only talk to the gateway or read the store: model keys and bot tokens may be unset. */
export function loadReadOnly(file: string | undefined): LoadedConfig {
  return loadConfig({ ...(file ? { file } : {}), readOnly: true });
}

/**
 * The gateway to talk to and its token: `--url`/`--token`, else the config (`gateway.url`,
 * `gateway.auth.token`), else what the gateway running on the config's state dir recorded there
 * (`gateway.json`, `gateway.token`), else http://host:port.
 */
export function clientFor(opts: ClientOpts): RpcClient {
  let url = opts.url;
  let token = opts.token;
  if (!url || !token) {
    try {
      const loaded = loadReadOnly(opts.config);
      const { config } = loaded;
      const stateDir = path.resolve(loaded.baseDir, config.stateDir);
      url ??=
        config.gateway.url ??
        readGatewayInfo(stateDir)?.url ??
        `http://${config.gateway.host.includes(":") ? `[${config.gateway.host}]` : config.gateway.host}:${config.gateway.port}`;
      token ??= config.gateway.auth.token ?? readGatewayToken(stateDir) ?? undefined;
    } catch (err) {
      if (!url) throw err;
    }
  }
  return new RpcClient(url ?? "http://127.0.0.1:18790", token);
}

/**
 * Read commands go to the running gateway; when none answers they read the local store directly
 * (API.md §2). That is safe: the fs store's lock refuses while a gateway owns the state dir.
 */
export async function readCall<T>(
  opts: ClientOpts,
  method: string,
  params: Record<string, unknown>,
  io: Io,
): Promise<T> {
  try {
    return await clientFor(opts).call<T>(method, params);
  } catch (err) {
    if (!(err instanceof SwitchboardError) || !/cannot reach the gateway/.test(err.message)) throw err;
    const loaded = loadReadOnly(opts.config);
    const { readLocal } = await import("../app/local-read.js");
    return readLocal<T>(loaded, method, params, {
      unreachable: err.message,
      onLocal: () => io.err("switchboard: no gateway answered; reading the local store"),
    });
  }
}

/** A numeric flag, checked here so the error names the flag the user typed (not an RPC param). */
export function numberFlag(
  flag: string,
  raw: unknown,
  range: { min?: number; max?: number; integer?: boolean; positive?: boolean } = {},
): number {
  const n = Number(raw);
  const { min, max, integer, positive } = range;
  const bad =
    typeof raw !== "string" ||
    raw.trim() === "" ||
    !Number.isFinite(n) ||
    (integer && !Number.isInteger(n)) ||
    (positive && n <= 0) ||
    (min !== undefined && n < min) ||
    (max !== undefined && n > max);
  if (bad) {
    const what = `${integer ? "an integer" : "a number"}${positive ? " above 0" : ""}`;
    const bounds =
      min !== undefined && max !== undefined
        ? ` between ${min} and ${max}`
        : min !== undefined
          ? ` of at least ${min}`
          : max !== undefined
            ? ` of at most ${max}`
            : "";
    throw new SwitchboardError("INVALID_PARAMS", `${flag}: must be ${what}${bounds} (got ${String(raw)})`);
  }
  return n;
}
