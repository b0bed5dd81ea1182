import { randomBytes } from "node:crypto";
import {
  chmodSync,
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { z } from "zod";

/**
 * The gateway's credentials in its state dir (API.md §7): `gateway.token` holds the bearer token a
 * gateway without `gateway.auth.token` generated at first start, `gateway.json` the URL of the
 * gateway now running. Both are 0600; the CLI and `switchboard mcp` read them from there.
 */

export const TOKEN_FILE = "gateway.token";
export const INFO_FILE = "gateway.json";

/** A configured secret shorter than this is logged as guessable at start (the contract sets no minimum). */
export const SHORT_TOKEN_CHARS = 16;

/** A warning for each configured secret (`gateway.auth.token`, `hooks.token`) shorter than SHORT_TOKEN_CHARS. */
export function shortTokenWarnings(secrets: {
  gateway?: string | undefined;
  hooks?: string | undefined;
}): string[] {
  const out: string[] = [];
  for (const [name, value] of [
    ["gateway.auth.token", secrets.gateway],
    ["hooks.token", secrets.hooks],
  ] as const) {
    if (value !== undefined && value.length < SHORT_TOKEN_CHARS)
      out.push(
        `${name} is only ${value.length} characters: anyone who can reach the port may guess it; use ${SHORT_TOKEN_CHARS} or more random characters`,
      );
  }
  return out;
}

/** 256 random bits, URL-safe (it travels in `#token=` of the web chat and dashboard URLs). */
export function generateToken(): string {
  return randomBytes(32).toString("base64url");
}

function readToken(file: string): string | null {
  try {
    const t = readFileSync(file, "utf8").trim();
    return t.length >= 16 ? t : null;
  } catch {
    return null;
  }
}

/** The token in `<stateDir>/gateway.token`, or null when there is none (or it is unreadable). */
export function readGatewayToken(stateDir: string): string | null {
  return readToken(path.join(stateDir, TOKEN_FILE));
}

/**
 * The state dir's token, created (0600, exclusively: two processes starting at once agree on one
 * token) when missing. A file readable by others is tightened to 0600.
 */
export function ensureGatewayToken(stateDir: string): { token: string; file: string; created: boolean } {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const file = path.join(stateDir, TOKEN_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    const existing = readToken(file);
    if (existing) {
      if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
      return { token: existing, file, created: false };
    }
    const token = generateToken();
    let fd: number;
    try {
      // A missing or unusable file: replace an unusable one, create a missing one exclusively.
      try {
        statSync(file);
        rmSync(file, { force: true });
      } catch {
        // missing: nothing to remove
      }
      fd = openSync(file, "wx", 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") continue; // another process won: read its token
      throw err;
    }
    try {
      writeFileSync(fd, `${token}\n`);
    } finally {
      closeSync(fd);
    }
    chmodSync(file, 0o600);
    return { token, file, created: true };
  }
  throw new Error(`could not create ${file}`);
}

const infoSchema = z.object({ url: z.string().url(), pid: z.number().int(), startedAt: z.number() });
export type GatewayInfo = z.infer<typeof infoSchema>;

/** Records where the running gateway listens (0600). */
export function writeGatewayInfo(stateDir: string, info: GatewayInfo): void {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const file = path.join(stateDir, INFO_FILE);
  writeFileSync(file, `${JSON.stringify(info)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}

/** The running gateway's record, or null (missing, unreadable or not ours). */
export function readGatewayInfo(stateDir: string): GatewayInfo | null {
  try {
    const parsed = infoSchema.safeParse(JSON.parse(readFileSync(path.join(stateDir, INFO_FILE), "utf8")));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Removes the record if it is still this process's (a newer gateway's record is left alone). */
export function removeGatewayInfo(stateDir: string, pid = process.pid): void {
  const info = readGatewayInfo(stateDir);
  if (info && info.pid === pid) rmSync(path.join(stateDir, INFO_FILE), { force: true });
}
