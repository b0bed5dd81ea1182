import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import os from "node:os";
import ipaddr from "ipaddr.js";

/**
 * Who may talk to the gateway from a browser (docs/security.md): the `Host` header must name the
 * gateway (loopback names, the bound address, `gateway.allowedHosts`) so DNS rebinding fails, and
 * an `Origin` must be the gateway's own (or in `gateway.allowedOrigins`) so another web page cannot
 * drive it (CSRF, cross-site WebSocket hijacking).
 */

/**
 * True for 127.0.0.0/8, ::1 and IPv4-mapped loopback (ipaddr.js ranges); false for every name
 * (names are resolved first). `isIP` gates the text first: ipaddr.js also reads classful forms
 * such as `127.1`, which no socket reports.
 */
export function isLoopbackIp(address: string): boolean {
  const a = address.replace(/^\[|\]$/g, "");
  if (isIP(a) === 0) return false;
  try {
    return ipaddr.process(a).range() === "loopback";
  } catch {
    return false; // a form node accepts and ipaddr.js does not: not provably loopback
  }
}

/**
 * Whether binding `host` exposes the gateway to this machine only: decided on the addresses it
 * resolves to (every one must be loopback), never on the spelling (`127.evil.invalid` is not).
 */
export async function resolvesToLoopback(host: string): Promise<boolean> {
  const h = host.replace(/^\[|\]$/g, "");
  if (isIP(h)) return isLoopbackIp(h);
  try {
    const addrs = await lookup(h, { all: true });
    return addrs.length > 0 && addrs.every((a) => isLoopbackIp(a.address));
  } catch {
    return false;
  }
}

const LOOPBACK_NAMES = new Set(["localhost", "localhost.", "127.0.0.1", "::1"]);

/** Splits a Host header value into its lower-case name (without brackets) and port. */
export function parseHostHeader(value: string): { name: string; port: string } | null {
  const v = value.trim().toLowerCase();
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]\s/@]+)(?::(\d{1,5}))?$/.exec(v);
  if (!m?.[1]) return null;
  return { name: m[1].replace(/^\[|\]$/g, ""), port: m[2] ?? "" };
}

function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "[::]";
}

export interface HostPolicyOptions {
  /** The address the gateway binds. */
  bindHost: string;
  allowedHosts: readonly string[];
  allowedOrigins: readonly string[];
}

export class HostPolicy {
  readonly #names = new Set<string>();
  readonly #full = new Set<string>();
  readonly #origins = new Set<string>();

  constructor(opts: HostPolicyOptions) {
    for (const n of LOOPBACK_NAMES) this.#names.add(n);
    const bind = opts.bindHost
      .trim()
      .toLowerCase()
      .replace(/^\[|\]$/g, "");
    if (isWildcard(bind)) {
      // Bound to every interface: each of this machine's own addresses names the gateway.
      for (const list of Object.values(os.networkInterfaces()))
        for (const i of list ?? []) this.#names.add(i.address.toLowerCase());
    } else this.#names.add(bind);
    for (const h of opts.allowedHosts) {
      const p = parseHostHeader(h);
      if (!p) continue;
      if (p.port) this.#full.add(`${p.name}:${p.port}`);
      else this.#names.add(p.name);
    }
    for (const o of opts.allowedOrigins) this.#origins.add(o.replace(/\/+$/, "").toLowerCase());
  }

  /** Whether a request's Host header names this gateway. */
  hostAllowed(header: string | undefined): boolean {
    if (!header) return false;
    const p = parseHostHeader(header);
    if (!p) return false;
    if (this.#names.has(p.name)) return true;
    if (isLoopbackIp(p.name)) return true;
    return p.port !== "" && this.#full.has(`${p.name}:${p.port}`);
  }

  /**
   * Whether a browser `Origin` may act on this gateway: the origin the page was served from (its
   * host equals the request's already-checked Host header) or one listed in allowedOrigins.
   */
  originAllowed(origin: string, hostHeader: string | undefined): boolean {
    const o = origin.trim().toLowerCase().replace(/\/+$/, "");
    if (this.#origins.has(o)) return true;
    let url: URL;
    try {
      url = new URL(o);
    } catch {
      return false; // "null" (sandboxed frames, file://) and garbage
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return false;
    if (!hostHeader) return false;
    return url.host === hostHeader.trim().toLowerCase() && this.hostAllowed(url.host);
  }
}
