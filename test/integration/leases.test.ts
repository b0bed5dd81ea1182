import { Writable } from "node:stream";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, afterEach, beforeEach, expect, it, vi } from "vitest";
import { AccountLeases, configFingerprint, leaseKey } from "../../src/app/leases.js";
import type { AccountLease, ChannelAdapter, ChannelStatus } from "../../src/channels/types.js";
import { eventually, REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix, startMonitor } from "../redis.js";

/**
 * Channel-account leases (issue 50, API.md §8.5) on the real Redis, with stand-in adapters that
 * record when they run: one holder at a time, a standby that names it, release on stop, and the
 * bad cases — Redis gone at a renewal, a key changed by hand, another config, a wall-clock jump —
 * each logged, never two holders, never none for longer than one lease.
 */

const TTL = 600;
const RENEW = 150;
const prefix = randomPrefix("lease");
const clients: Redis[] = [];
const managers: AccountLeases[] = [];

afterEach(async () => {
  for (const m of managers.splice(0)) await m.stop();
  vi.restoreAllMocks();
});

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await dropPrefix(prefix);
});

/** Which stand-in runs, sampled: "two at once" anywhere in the timeline is the bug. */
const running = new Set<string>();
const overlaps: string[] = [];
/** When each stand-in last stopped (performance.now()), taken in stop() itself, not by a poll. */
const stoppedAt = new Map<string, number>();

function standIn(gateway: string): ChannelAdapter & { runs: number; lease?: AccountLease } {
  let state: ChannelStatus = "stopped";
  const a = {
    channel: "telegram",
    accountId: "default",
    exclusive: true,
    capabilities: {
      textLimit: 4096,
      threads: false,
      typing: false,
      markdown: "plain" as const,
      createThread: false,
    },
    runs: 0,
    lease: undefined as AccountLease | undefined,
    async start() {
      if (running.size > 0) overlaps.push(`${gateway} started while ${[...running].join(",")} ran`);
      running.add(gateway);
      state = "connected";
      a.runs++;
    },
    async stop() {
      running.delete(gateway);
      stoppedAt.set(gateway, performance.now());
      state = "stopped";
    },
    async send() {
      return { messageIds: [] };
    },
    status: () => ({ state }),
  };
  return a;
}

function logSink(): {
  logger: pino.Logger;
  lines: Array<{ level: number; msg: string } & Record<string, unknown>>;
} {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _e, cb) {
      for (const l of chunk.toString("utf8").split("\n")) if (l.trim()) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { logger: pino({ level: "info" }, stream), lines };
}

let testNo = 0;
let testPrefix = prefix;
beforeEach(() => {
  testPrefix = `${prefix}:${++testNo}`;
});

/** A gateway's lease manager over its own client (fails fast while Redis is away, as the app's). */
async function gateway(name: string, opts: { fingerprint?: string } = {}) {
  const client = new Redis(REDIS_URL, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    lazyConnect: true,
  });
  await client.connect();
  clients.push(client);
  const log = logSink();
  const m = new AccountLeases({
    client,
    prefix: testPrefix,
    ttlMs: TTL,
    renewMs: RENEW,
    logger: log.logger,
    holder: name,
  });
  const adapter = standIn(name);
  m.add(adapter, opts.fingerprint ?? configFingerprint({ token: "same" }));
  managers.push(m);
  const start = () =>
    m.start(async (a, lease) => {
      (a as typeof adapter).lease = lease;
      await a.start(async () => {});
    });
  return { m, adapter, client, log, start };
}

describeRedis("channel-account leases", () => {
  it("one gateway holds the account, the other stands by naming it; a stop releases at once", async () => {
    const a = await gateway("gw-a");
    const b = await gateway("gw-b");
    await a.start();
    await b.start();
    expect(a.adapter.runs).toBe(1);
    expect(b.adapter.runs).toBe(0);
    expect(a.m.info("telegram", "default")).toEqual({ lease: "held", heldBy: "gw-a" });
    expect(b.m.info("telegram", "default")).toEqual({ lease: "standby", heldBy: "gw-a" });
    expect(a.adapter.lease?.valid()).toBe(true);
    const firstToken = a.adapter.lease?.token ?? 0;
    expect(firstToken).toBeGreaterThan(0);
    // Held through many renewals.
    await new Promise((r) => setTimeout(r, TTL * 2));
    expect(a.m.info("telegram", "default")?.lease).toBe("held");
    // SIGTERM path: released, taken on the standby's next round (not after the ttl).
    const stopped = performance.now();
    await a.m.stop();
    await eventually(() => b.adapter.runs === 1, 200, 5);
    expect(performance.now() - stopped).toBeLessThan(RENEW + 150);
    expect(b.adapter.lease?.token).toBeGreaterThan(firstToken); // fencing token grows
    expect(a.adapter.lease?.valid()).toBe(false);
    expect(overlaps).toEqual([]);
  });

  it("Redis unreachable at a renewal: the holder stops before its lease ends, the other takes over after it", async () => {
    const a = await gateway("gw-a2");
    const b = await gateway("gw-b2");
    await a.start();
    await b.start();
    expect(a.adapter.runs).toBe(1);
    const cut = performance.now();
    a.client.disconnect(); // every renewal from now on fails at once
    await eventually(() => b.adapter.runs === 1, 400, 5);
    const takenAt = performance.now();
    const stopped = stoppedAt.get("gw-a2") ?? 0;
    expect(stopped).toBeGreaterThan(cut);
    expect(stopped - cut).toBeLessThan(TTL); // stopped inside its lease
    expect(takenAt - cut).toBeLessThan(TTL + RENEW + 300); // none for at most about one lease
    expect(overlaps).toEqual([]);
    expect(a.log.lines.some((l) => /renewal failed \(Redis unreachable\?\)/.test(l.msg))).toBe(true);
    expect(a.log.lines.some((l) => /not renewed in time/.test(l.msg))).toBe(true);
    await b.m.stop();
  });

  it("a lease key changed by hand is reported, expires within one lease, and is taken again", async () => {
    const a = await gateway("gw-a3");
    await a.start();
    const writer = new Redis(REDIS_URL);
    clients.push(writer);
    const key = leaseKey(testPrefix, "telegram", "default");
    await writer.set(key, "not a lease"); // no expiry at all
    await eventually(() => !running.has("gw-a3"), 200, 5);
    expect(a.log.lines.some((l) => l.level === 50 && /not a lease \(changed by hand\?\)/.test(l.msg))).toBe(
      true,
    );
    const pttl = await writer.pttl(key);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(TTL);
    await eventually(() => running.has("gw-a3"), 300, 5);
    expect(a.m.info("telegram", "default")?.lease).toBe("held");
    expect(overlaps).toEqual([]);
  });

  it("a standby with another config for the account says so, once, and what to do", async () => {
    const a = await gateway("gw-a4", { fingerprint: configFingerprint({ token: "one" }) });
    const b = await gateway("gw-b4", { fingerprint: configFingerprint({ token: "two" }) });
    await a.start();
    await b.start();
    await new Promise((r) => setTimeout(r, RENEW * 3));
    const said = b.log.lines.filter((l) => /runs a different config/.test(l.msg));
    expect(said).toHaveLength(1);
    expect(said[0]?.msg).toMatch(/channels\.telegram\.accounts\.default: .*same channels config/);
    expect(b.adapter.runs).toBe(0);
  });

  it("a wall-clock jump changes nothing (monotonic time here, PX in Redis)", async () => {
    const a = await gateway("gw-a5");
    const b = await gateway("gw-b5");
    await a.start();
    await b.start();
    const real = Date.now;
    vi.spyOn(Date, "now").mockImplementation(() => real() + 3_600_000);
    await new Promise((r) => setTimeout(r, TTL * 2));
    vi.spyOn(Date, "now").mockImplementation(() => real() - 3_600_000);
    await new Promise((r) => setTimeout(r, TTL));
    expect(a.m.info("telegram", "default")?.lease).toBe("held");
    expect(b.adapter.runs).toBe(0);
    expect(a.adapter.runs).toBe(1);
    expect(overlaps).toEqual([]);
  });

  it("costs one Redis command per account per renewMs per gateway", async () => {
    const a = await gateway("gw-a6");
    const b = await gateway("gw-b6");
    await a.start();
    await b.start();
    const key = leaseKey(testPrefix, "telegram", "default");
    const bySource = new Map<string, number>();
    const stop = await startMonitor((args, source) => {
      if (source !== "lua" && args.includes(key)) bySource.set(source, (bySource.get(source) ?? 0) + 1);
    });
    const windowMs = RENEW * 10;
    await new Promise((r) => setTimeout(r, windowMs));
    stop();
    expect(bySource.size).toBe(2); // both gateways
    for (const n of bySource.values()) expect(n).toBeLessThanOrEqual(windowMs / RENEW + 1);
  });
});
