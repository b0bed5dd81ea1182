import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";

/** The first screen on a terminal, and a compact line format for the logs that follow it. */

export interface BannerFacts {
  version: string;
  role: "gateway" | "worker";
  url: string | null;
  webchat: boolean;
  /** A token generated into the state dir (shown in the URLs); null when configured or none. */
  generatedToken: string | null;
  tokenConfigured: boolean;
  storage: string;
  queue: string;
  model: string;
  config: string | null;
}

/**
 * The gateway token to put into the banner's URLs: only one generated into the state dir
 * (`<stateDir>/gateway.token`, API.md §7); a configured token is the operator's own.
 */
export function generatedToken(stateDir: string, configured: string | undefined): string | null {
  if (configured) return null;
  const file = path.join(stateDir, "gateway.token");
  if (!existsSync(file)) return null;
  const token = readFileSync(file, "utf8").trim();
  return token || null;
}

export function banner(f: BannerFacts): string {
  const fragment = f.generatedToken ? `#token=${encodeURIComponent(f.generatedToken)}` : "";
  const rows: Array<[string, string]> = [];
  if (f.url) {
    if (f.webchat) rows.push(["Web chat", `${f.url}/${fragment}`]);
    rows.push(["Dashboard", `${f.url}/dashboard${fragment}`]);
    if (f.tokenConfigured) rows.push(["Token", "gateway.auth.token (add #token=<token> to the URLs)"]);
  } else rows.push(["Role", "worker (pipeline jobs only; no RPC, no channels)"]);
  rows.push(["Storage", f.storage], ["Queue", f.queue], ["Model", f.model]);
  rows.push(["Config", f.config ?? "built-in defaults (no config file)"]);
  const lines = [
    `Switchboard ${f.version} ${f.role}`,
    ...rows.map(([k, v]) => `  ${k.padEnd(10)} ${v}`),
    "",
    "  Ctrl-C to stop",
    "",
  ];
  return lines.join("\n");
}

const LEVELS: Record<number, string> = {
  10: "trace",
  20: "debug",
  30: "info",
  40: "warn",
  50: "error",
  60: "fatal",
};

/** A pino destination that prints `HH:MM:SS level message` lines instead of JSON (for terminals). */
export function textLogStream(write: (s: string) => void): Writable {
  let pending = "";
  return new Writable({
    write(chunk, _enc, done) {
      pending += String(chunk);
      let nl = pending.indexOf("\n");
      while (nl >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        write(formatLine(line));
        nl = pending.indexOf("\n");
      }
      done();
    },
  });
}

export function formatLine(line: string): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return `${line}\n`;
  }
  const time = new Date(Number(rec.time)).toTimeString().slice(0, 8);
  const level = LEVELS[Number(rec.level)] ?? "info";
  const err = rec.err as { message?: string } | undefined;
  const extra = err?.message ? ` (${err.message})` : "";
  const tag = level === "info" ? "" : ` ${level.toUpperCase()}`;
  return `${time}${tag} ${String(rec.msg ?? "")}${extra}\n`;
}
