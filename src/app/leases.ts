import { createHash, randomBytes } from "node:crypto";
import os from "node:os";
import type { Redis } from "ioredis";
import type { AccountLease, ChannelAdapter } from "../channels/types.js";
import { channelSettings } from "../config/channels.js";
import type { Config } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import { acquireLease, LEASE_SCRIPTS, releaseLease } from "../redis/commands/leases.js";
import type { RedisConnections } from "../redis/connections.js";
import { ScriptRunner } from "../redis/scripts.js";
import { within } from "../retry/index.js";

/**
 * Channel-account leases (many gateways, API.md §8.5). With the redis store, every gateway runs
 * the same channel config, and each account's live connection (long polling, a gateway socket,
 * Socket Mode, a WhatsApp socket) runs in exactly one of them: the holder of a fenced lease in
 * Redis (`{prefix}:lease:{<channel>:<account>}`, a JSON value `{t, h, f}` with a PX expiry; the
 * fencing token `t` comes from a counter beside it and grows with every new holder).
 *
 * - Every `renewMs` each gateway runs one script per account (acquireLease-2): the holder renews,
 *   a standby learns the holder or takes a free (expired or released) lease. That is the whole
 *   cost: one Redis command per account per `renewMs` per gateway, none while one is in flight;
 *   only when a standby sees the lease end before its next round (the holder stopped renewing)
 *   does it ask once more, right at that end, so a takeover waits for the ttl, not ttl + renewMs.
 * - The holder's lease ends, locally, `ttlMs - margin` after the *start* of its last successful
 *   renewal, on the monotonic clock (Redis counts the ttl from later, with PX): wall-clock jumps
 *   change nothing. `valid()` (handed to the adapter) is false from then on, so no acknowledgement
 *   is made past it, and a watchdog stops the account `margin` before that, whatever Redis says
 *   (Redis gone, a partition, a stalled event loop). Another gateway takes the lease once Redis
 *   expires it: never two holders, and none for at most `ttlMs + renewMs`.
 * - stop() (SIGTERM) stops the held accounts and deletes their leases at once, so a standby
 *   takes over on its next renewal instead of after the ttl.
 * - Detected and logged with what to do: a lease held under another config (fingerprint `f`), a
 *   key that is not a lease (changed by hand: it is given a ttl and taken after it), Redis
 *   unreachable at a renewal, an account whose start failed (its lease is released, retried later).
 */

export interface LeaseSettings {
  ttlMs: number;
  renewMs: number;
}

export interface LeaseInfo {
  lease: "held" | "standby";
  /** The gateway holding the account (this one when held); null while nobody does. */
  heldBy: string | null;
}

/** Starts an adapter under its lease (the app's inbound handler and context, plus the lease). */
export type StartUnderLease = (adapter: ChannelAdapter, lease: AccountLease) => Promise<void>;

export interface AccountLeasesOptions extends LeaseSettings {
  client: Redis;
  /** The store prefix (`storage.prefix`). */
  prefix: string;
  logger: Logger;
  /** This gateway's name in leases and health (default `<hostname>:<pid>:<random>`). */
  holder?: string;
  /** Monotonic milliseconds (default performance.now). */
  now?: () => number;
}

interface Held {
  adapter: ChannelAdapter;
  name: string;
  key: string;
  fenceKey: string;
  fingerprint: string;
  /** The fencing token while this gateway holds the lease. */
  token: number | null;
  /** Monotonic end of the lease, from the start of its last successful renewal. */
  validUntil: number;
  heldBy: string | null;
  running: boolean;
  /** Starts and stops of this account, one after the other. */
  op: Promise<void>;
  inflight: boolean;
  watchdog: NodeJS.Timeout | undefined;
  /** A round scheduled for the moment another holder's lease runs out. */
  soon: NodeJS.Timeout | undefined;
  /** Conditions already logged (logged again once they clear and come back). */
  warned: Set<string>;
  /** A failed start waits until then before taking the lease again. */
  cooldownUntil: number;
}

/** A short, stable hash of an account's config: two gateways with different configs for one account differ. */
export function configFingerprint(accountConfig: unknown): string {
  return createHash("sha256").update(stableJson(accountConfig)).digest("hex").slice(0, 12);
}

function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

export function defaultHolderId(): string {
  return `${os.hostname()}:${process.pid}:${randomBytes(2).toString("hex")}`;
}

/** The lease key of one account (hash-tagged with its fence counter). */
export function leaseKey(prefix: string, channel: string, accountId: string): string {
  return `${prefix}:lease:{${channel}:${accountId}}`;
}

export class AccountLeases {
  readonly holder: string;
  readonly #accounts: Held[] = [];
  readonly #runner: ScriptRunner;
  readonly #now: () => number;
  readonly #margin: number;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #run: StartUnderLease = async () => {};

  constructor(private readonly opts: AccountLeasesOptions) {
    this.holder = opts.holder ?? defaultHolderId();
    this.#runner = new ScriptRunner(opts.client, "channel leases");
    this.#now = opts.now ?? (() => performance.now());
    // Room for clock-rate drift and for the stop itself, inside the lease.
    this.#margin = Math.max(50, Math.min(1000, Math.floor(opts.ttlMs / 10)));
  }

  /** An account whose live connection runs under a lease; `fingerprint` is its config's. */
  add(adapter: ChannelAdapter, fingerprint: string): void {
    const key = leaseKey(this.opts.prefix, adapter.channel, adapter.accountId);
    this.#accounts.push({
      adapter,
      name: `${adapter.channel}:${adapter.accountId}`,
      key,
      fenceKey: `${key}:fence`,
      fingerprint,
      token: null,
      validUntil: 0,
      heldBy: null,
      running: false,
      op: Promise.resolve(),
      inflight: false,
      watchdog: undefined,
      soon: undefined,
      warned: new Set(),
      cooldownUntil: 0,
    });
  }

  get size(): number {
    return this.#accounts.length;
  }

  /** Held or standby, and by whom, for `health`; undefined for an account not under a lease. */
  info(channel: string, accountId: string): LeaseInfo | undefined {
    const acc = this.#accounts.find(
      (a) => a.adapter.channel === channel && a.adapter.accountId === accountId,
    );
    if (!acc) return undefined;
    return this.#valid(acc)
      ? { lease: "held", heldBy: this.holder }
      : { lease: "standby", heldBy: acc.heldBy };
  }

  /** First round at once (takes the free leases), then one round every renewMs. */
  async start(run: StartUnderLease): Promise<void> {
    if (this.#accounts.length === 0 || this.#timer) return;
    this.#run = run;
    this.#stopped = false;
    await this.#runner.load(LEASE_SCRIPTS).catch(() => undefined); // EVAL falls back if this failed
    this.#timer = setInterval(() => this.#round(), this.opts.renewMs);
    await Promise.all(this.#accounts.map((a) => this.#tick(a)));
    // The accounts taken in the first round are up when start() resolves.
    await Promise.all(this.#accounts.map((a) => a.op));
  }

  /** Stops every held account, then releases its lease (bounded: Redis may be gone). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.all(
      this.#accounts.map(async (acc) => {
        clearTimeout(acc.watchdog);
        clearTimeout(acc.soon);
        acc.soon = undefined;
        const token = acc.token;
        this.#stopAccount(acc);
        await acc.op;
        acc.token = null;
        if (token === null) return;
        const released = await within(
          this.#runner.run(releaseLease, [acc.key], [this.holder, token]).then(
            (r) => r === 1,
            () => false,
          ),
          1000,
        );
        this.opts.logger.info(
          { account: acc.name, fence: token, released: released === true },
          released ? "channel lease released" : "channel lease not released (it expires by itself)",
        );
      }),
    );
  }

  // ------------------------------------------------------------------------------ internals

  #round(): void {
    for (const acc of this.#accounts) void this.#tick(acc);
  }

  #valid(acc: Held): boolean {
    return acc.token !== null && this.#now() < acc.validUntil;
  }

  async #tick(acc: Held): Promise<void> {
    if (acc.inflight || this.#stopped) return;
    // After a failed start, stand by for a while (taking the lease would only block the others).
    if (acc.token === null && this.#now() < acc.cooldownUntil) return;
    acc.inflight = true;
    const began = this.#now();
    try {
      const reply = await this.#runner.run(
        acquireLease,
        [acc.key, acc.fenceKey],
        [this.holder, acc.fingerprint, this.opts.ttlMs],
      );
      if (!this.#stopped) this.#onReply(acc, reply, began);
    } catch (err) {
      if (!this.#stopped) this.#onUnreachable(acc, err);
    } finally {
      acc.inflight = false;
    }
  }

  #onReply(acc: Held, reply: unknown, began: number): void {
    const [code, a, b] = Array.isArray(reply) ? (reply as unknown[]) : [];
    this.#clear(acc, "unreachable");
    if (code === 1 || code === 2) {
      const token = Number(a);
      if (code === 2)
        this.opts.logger.info(
          { account: acc.name, fence: token, holder: this.holder },
          "channel lease taken",
        );
      acc.token = token;
      acc.heldBy = this.holder;
      acc.validUntil = began + this.opts.ttlMs - this.#margin;
      this.#clear(acc, "corrupt");
      this.#armWatchdog(acc);
      if (!acc.running) this.#startAccount(acc);
      return;
    }
    if (code === 0) {
      const v = parseLease(String(a));
      // The holder's lease runs out before our next round (it stopped renewing): ask right then.
      const pttl = Number(b);
      if (pttl >= 0 && pttl < this.opts.renewMs && acc.soon === undefined) {
        acc.soon = setTimeout(() => {
          acc.soon = undefined;
          void this.#tick(acc);
        }, pttl + 5);
        acc.soon.unref?.();
      }
      const lost = acc.token !== null;
      acc.heldBy = v?.h ?? null;
      this.#clear(acc, "corrupt");
      if (lost) {
        this.opts.logger.warn(
          { account: acc.name, fence: acc.token, heldBy: acc.heldBy },
          "channel lease lost to another gateway (this one did not renew in time: a stall or a partition?); stopping the account here",
        );
        this.#drop(acc);
      }
      if (v && v.f !== acc.fingerprint)
        this.#warn(acc, `config:${v.h}:${v.f}`, () =>
          this.opts.logger.error(
            { account: acc.name, heldBy: v.h, theirs: v.f, ours: acc.fingerprint },
            `channels.${acc.adapter.channel}.accounts.${acc.adapter.accountId}: the gateway holding this account runs a different config for it; give every gateway the same channels config (then restart the odd one): until then the holder's config serves the account`,
          ),
        );
      return;
    }
    if (code === -1) {
      this.#warn(acc, "corrupt", () =>
        this.opts.logger.error(
          { account: acc.name, key: acc.key, value: String(a).slice(0, 200), expiresInMs: Number(b) },
          "channel lease key holds something that is not a lease (changed by hand?): it now expires within one lease and a gateway takes it then; to hurry, DEL the key",
        ),
      );
      if (acc.token !== null) this.#drop(acc);
      acc.heldBy = null;
      return;
    }
    this.opts.logger.error({ account: acc.name, reply }, "channel lease: unexpected script reply");
  }

  #onUnreachable(acc: Held, err: unknown): void {
    this.#warn(acc, "unreachable", () =>
      this.opts.logger.warn(
        {
          account: acc.name,
          err: errorMessage(err),
          ...(acc.token !== null ? { stopsInMs: Math.max(0, Math.round(acc.validUntil - this.#now())) } : {}),
        },
        acc.token !== null
          ? "channel lease: renewal failed (Redis unreachable?); the account stops before its lease ends unless Redis answers again. Check storage.redisUrl"
          : "channel lease: Redis unreachable; this gateway stands by until it answers. Check storage.redisUrl",
      ),
    );
  }

  /** Stops the account `margin` before its lease ends unless a renewal moved the end on. */
  #armWatchdog(acc: Held): void {
    clearTimeout(acc.watchdog);
    const at = acc.validUntil - this.#margin;
    const fire = () => {
      if (acc.token === null || this.#stopped) return;
      const left = at - this.#now();
      if (left > 0) {
        acc.watchdog = setTimeout(fire, left);
        return;
      }
      this.opts.logger.error(
        { account: acc.name, fence: acc.token },
        "channel lease not renewed in time (Redis unreachable, a partition or a stalled event loop): stopping the account before the lease ends; another gateway takes it over",
      );
      this.#drop(acc);
    };
    acc.watchdog = setTimeout(fire, Math.max(0, at - this.#now()));
    acc.watchdog.unref?.();
  }

  #drop(acc: Held): void {
    clearTimeout(acc.watchdog);
    acc.token = null;
    this.#stopAccount(acc);
  }

  #startAccount(acc: Held): void {
    const lease: AccountLease = {
      get token() {
        return acc.token ?? 0;
      },
      valid: () => this.#valid(acc),
    };
    acc.op = acc.op.then(async () => {
      if (acc.running || !this.#valid(acc) || this.#stopped) return;
      acc.running = true;
      try {
        await this.#run(acc.adapter, lease);
        this.opts.logger.info(
          { account: acc.name, fence: acc.token },
          "channel account started under its lease",
        );
      } catch (err) {
        acc.running = false;
        acc.cooldownUntil = this.#now() + 5 * this.opts.renewMs;
        this.opts.logger.error(
          { account: acc.name, err: errorMessage(err) },
          "channel account failed to start under its lease; releasing it so another gateway can try (retried here later)",
        );
        const token = acc.token;
        this.#drop(acc);
        if (token !== null)
          await within(
            this.#runner.run(releaseLease, [acc.key], [this.holder, token]).catch(() => 0),
            1000,
          );
      }
    });
  }

  #stopAccount(acc: Held): void {
    acc.op = acc.op.then(async () => {
      if (!acc.running) return;
      acc.running = false;
      await acc.adapter
        .stop()
        .catch((err: unknown) =>
          this.opts.logger.warn({ account: acc.name, err: errorMessage(err) }, "channel stop failed"),
        );
    });
  }

  #warn(acc: Held, condition: string, log: () => void): void {
    if (acc.warned.has(condition)) return;
    acc.warned.add(condition);
    log();
  }

  #clear(acc: Held, prefix: string): void {
    for (const c of acc.warned) if (c.startsWith(prefix)) acc.warned.delete(c);
  }
}

function parseLease(raw: string): { t: number; h: string; f: string } | null {
  try {
    const v = JSON.parse(raw) as { t?: unknown; h?: unknown; f?: unknown };
    if (typeof v.t === "number" && typeof v.h === "string")
      return { t: v.t, h: v.h, f: typeof v.f === "string" ? v.f : "" };
  } catch {
    // not a lease: the script reports that case itself
  }
  return null;
}

/**
 * The leases of a gateway on the redis store: every adapter with a live connection only one
 * process may hold (`exclusive`: polling, sockets; not webhooks, not the web chat). Null on the
 * fs store (one gateway: the embedded mode is unchanged) or when no account needs one.
 */
export async function createAccountLeases(
  config: Config,
  redis: RedisConnections,
  adapters: readonly ChannelAdapter[],
  logger: Logger,
): Promise<AccountLeases | null> {
  if (config.storage.driver !== "redis") return null;
  const exclusive = adapters.filter((a) => a.exclusive === true);
  if (exclusive.length === 0) return null;
  const client = await redis.shared(config.storage.redisUrl, "config: storage.redisUrl");
  const leases = new AccountLeases({
    client,
    prefix: config.storage.prefix,
    ttlMs: config.gateway.leases.ttlMs,
    renewMs: config.gateway.leases.renewMs,
    logger: logger.child({ component: "leases" }),
  });
  for (const a of exclusive)
    leases.add(a, configFingerprint(channelSettings(config, a.channel)?.accounts?.[a.accountId] ?? null));
  return leases;
}
