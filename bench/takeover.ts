/**
 * Many gateways, one bot (issue 50): takeover of channel accounts when the gateway holding them
 * dies. Starts its own redis-server on a free port (stopped by PID), the loopback Telegram fake
 * (409 to a second concurrent getUpdates, like Telegram) and Discord fake, and three real
 * `switchboard start` processes (dist/, redis store + bullmq) with the same Telegram and Discord
 * accounts. Direct messages keep arriving on both; the gateway holding the Telegram lease is
 * SIGKILLed `kills` times (a fresh one is started after each kill, so three keep running). Checks
 * that every message is answered exactly once, and measures each takeover: kill → the first reply
 * to a message sent after the kill, per account the victim held.
 *
 * Discord's gateway has no acknowledgements: an event handed to a process that dies before it
 * stored the message is lost on the real platform too, so before each kill the Discord feed pauses
 * until every DM so far is answered, and the fake holds DMs while no bot is connected (the Telegram feed never
 * pauses: unconfirmed updates are fetched again by the next holder).
 *
 * `npm run chaos` prints the distribution (CHAOS_TAKEOVER_KILLS, default 10; CHAOS_DEBUG=1 and
 * CHAOS_LOG_LEVEL=info show the gateways' logs);
 * test/integration/leases-chaos.test.ts runs five kills.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { FakeDiscord, type FakeDiscordUser } from "../test/fakes/discord.js";
import { FakeTelegram, type FakeUser } from "../test/fakes/telegram.js";
import { freePort, tracked, waitUntil } from "./proc.js";

export interface TakeoverOptions {
  kills: number;
  ttlMs: number;
  renewMs: number;
  /** Between two messages of one channel, ms. */
  intervalMs?: number;
  log?: (line: string) => void;
}

export interface TakeoverFigures {
  kills: number;
  sent: number;
  answered: number;
  /** Messages with no reply at the end. */
  missing: string[];
  /** Messages answered more than once. */
  duplicated: string[];
  /**
   * Replies the gateways logged as sent again because a kill fell between the platform's yes and
   * the outbox mark (the README's window, inherent to SIGKILL): duplicates beyond this are bugs.
   */
  resends: number;
  /** Kill → first reply to a message sent after the kill, ms, one per account moved. */
  takeoverMs: { telegram: number[]; discord: number[] };
  /** Kill → the new holder's first getUpdates (Telegram) / IDENTIFY (Discord), ms. */
  connectMs: { telegram: number[]; discord: number[] };
  /** ttlMs + renewMs + 2000: the bound each takeover must meet. */
  boundMs: number;
}

const BIN = path.resolve(import.meta.dirname, "../bin/switchboard.js");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startRedis(dir: string): Promise<{ url: string; proc: ChildProcess }> {
  const port = await freePort();
  const proc = tracked(
    spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no"],
      { stdio: "ignore" },
    ),
  );
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  probe.on("error", () => {});
  try {
    for (let i = 0; i < 200; i++) {
      if (probe.status !== "ready") await probe.connect().catch(() => undefined);
      if ((await probe.ping().catch(() => null)) === "PONG") return { url, proc };
      await sleep(25);
    }
  } finally {
    probe.disconnect();
  }
  proc.kill("SIGKILL");
  throw new Error(`redis-server on port ${port} did not answer`);
}

async function stopByPid(proc: ChildProcess, signal: NodeJS.Signals, ms: number): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null || proc.pid === undefined) return;
  const exited = new Promise((r) => proc.once("exit", r));
  process.kill(proc.pid, signal);
  const done = await Promise.race([exited.then(() => true), sleep(ms).then(() => false)]);
  if (!done && proc.exitCode === null) {
    process.kill(proc.pid, "SIGKILL");
    await exited;
  }
}

export async function runTakeover(opts: TakeoverOptions): Promise<TakeoverFigures> {
  const startedAt = Date.now();
  const log0 = opts.log ?? (() => {});
  const log = (l: string) => log0(l.startsWith("gw-") ? l : `[+${Date.now() - startedAt} ms] ${l}`);
  const interval = opts.intervalMs ?? 250;
  const boundMs = opts.ttlMs + opts.renewMs + 2000;
  const tmp = mkdtempSync(path.join(os.tmpdir(), "sb-takeover-"));
  const redis = await startRedis(tmp);
  const tg = await FakeTelegram.start(undefined, { exclusivePolling: true });
  const dc = await FakeDiscord.start();
  dc.holdWhileOffline = true;
  const prefix = "takeover";
  const r = new Redis(redis.url);
  const gateways = new Map<number, ChildProcess>();
  /** State dirs of the gateways started; one is up once it wrote gateway.json (listening, leases next). */
  const stateDirs = new Map<number, string>();
  let n = 0;
  let resends = 0;

  const launch = () => {
    const i = n++;
    const stateDir = path.join(tmp, `gw-${i}`);
    mkdirSync(stateDir, { recursive: true });
    const cfg = path.join(stateDir, "switchboard.json");
    writeFileSync(
      cfg,
      JSON.stringify({
        stateDir,
        logLevel: process.env.CHAOS_LOG_LEVEL ?? "warn",
        gateway: { port: 0, leases: { ttlMs: opts.ttlMs, renewMs: opts.renewMs } },
        storage: { driver: "redis", redisUrl: redis.url, prefix },
        queue: {
          driver: "bullmq",
          redisUrl: redis.url,
          prefix,
          concurrency: 8,
          // one turn per message, so each reply echoes exactly one message
          mode: "followup",
          lockDurationMs: 3000,
          stalledIntervalMs: 1000,
        },
        session: { dmScope: "per-channel-peer" },
        channels: {
          telegram: {
            accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } },
            dmPolicy: "open",
            allowFrom: ["*"],
            streaming: "off",
          },
          discord: {
            accounts: { default: { token: dc.token, apiUrl: dc.apiUrl, gatewayUrl: dc.gatewayUrl } },
            dmPolicy: "open",
            allowFrom: ["*"],
            streaming: "off",
          },
          webchat: { enabled: false },
        },
      }),
    );
    const child = tracked(
      spawn(process.execPath, [BIN, "start", "--config", cfg, "--port", "0"], {
        env: { ...process.env, SWITCHBOARD_CONFIG: "" },
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    const relay = (d: Buffer) => {
      for (const l of d.toString("utf8").split("\n")) {
        if (!l.trim()) continue;
        if (l.includes("was interrupted before its mark")) resends++;
        log(`gw-${i}: ${l.slice(0, 400)}`);
      }
    };
    child.stdout?.on("data", relay);
    child.stderr?.on("data", relay);
    if (child.pid !== undefined) {
      gateways.set(child.pid, child);
      stateDirs.set(child.pid, stateDir);
    }
    child.once("exit", () => {
      if (child.pid !== undefined) gateways.delete(child.pid);
    });
    return child;
  };

  const holderPid = async (channel: string): Promise<number | undefined> => {
    const raw = await r.get(`${prefix}:lease:{${channel}:default}`);
    if (!raw) return undefined;
    const h = (JSON.parse(raw) as { h?: string }).h ?? "";
    const pid = Number(h.split(":").at(-2));
    return gateways.has(pid) ? pid : undefined;
  };

  // ── the feed: direct messages from a few people on each channel ──
  const tgUsers: FakeUser[] = Array.from({ length: 12 }, (_, k) => ({
    id: 5001 + k,
    is_bot: false,
    first_name: `T${k}`,
  }));
  const dcUsers: FakeDiscordUser[] = Array.from({ length: 12 }, (_, k) => k + 1).map((k) =>
    dc.addUser(`d${k}`),
  );
  const sentAt = new Map<string, number>();
  // Each person writes every 12 × intervalMs: under Discord's ~5 posts per 5 s per channel.
  let feeding = false;
  let discordPaused = false;
  let seq = 0;
  let feed: Promise<void> = Promise.resolve();
  const startFeed = () => {
    feeding = true;
    feed = feedLoop();
  };
  const feedLoop = async () => {
    while (feeding) {
      const k = seq++;
      const t = `tg-${k}`;
      const tu = tgUsers[k % tgUsers.length] as FakeUser;
      sentAt.set(t, Date.now());
      tg.pushMessage({ id: tu.id, type: "private" }, tu, { text: t });
      if (!discordPaused) {
        const d = `dc-${k}`;
        sentAt.set(d, Date.now());
        if (process.env.CHAOS_DEBUG) log(`${d} live=${dc.liveConnections}`);
        dc.dm(dcUsers[k % dcUsers.length] as FakeDiscordUser, d);
      }
      await sleep(interval);
    }
  };

  /** Reply times per token, in order (Telegram calls carry their time; Discord's are seen here). */
  const dcSeen = new Map<string, number[]>();
  let dcScanned = 0;
  const replies = (): Map<string, number[]> => {
    const out = new Map<string, number[]>();
    for (const c of tg.calls) {
      if (c.method !== "sendMessage" || c.ok !== true) continue;
      for (const m of String(c.payload.text).matchAll(/\btg-\d+\b/g)) {
        const l = out.get(m[0]) ?? [];
        l.push(c.at ?? 0);
        out.set(m[0], l);
      }
    }
    for (; dcScanned < dc.sent.length; dcScanned++) {
      const text = String(dc.sent[dcScanned]?.body.content ?? "");
      for (const m of text.matchAll(/\bdc-\d+\b/g)) {
        const l = dcSeen.get(m[0]) ?? [];
        l.push(Date.now());
        dcSeen.set(m[0], l);
      }
    }
    for (const [k, v] of dcSeen) out.set(k, v);
    return out;
  };
  /** First reply after `t0` to a message of `channel` sent after `t0`. */
  const firstReplyAfter = (channel: "tg" | "dc", t0: number): number | undefined => {
    let best: number | undefined;
    for (const [token, times] of replies()) {
      if (!token.startsWith(`${channel}-`) || (sentAt.get(token) ?? 0) <= t0) continue;
      const at = times[0] ?? Number.POSITIVE_INFINITY;
      if (best === undefined || at < best) best = at;
    }
    return best;
  };

  const takeoverMs = { telegram: [] as number[], discord: [] as number[] };
  const connectMs = { telegram: [] as number[], discord: [] as number[] };
  try {
    for (let i = 0; i < 3; i++) launch();
    // Up: both accounts held, then the feed starts and is answered.
    await waitUntil(
      async () => !!(await holderPid("telegram")) && !!(await holderPid("discord")),
      60_000,
      50,
    );
    log("gateways up: feeding");
    startFeed();
    if (!(await waitUntil(() => !!(firstReplyAfter("tg", 0) && firstReplyAfter("dc", 0)), 30_000)))
      throw new Error("the gateways did not start answering");
    /** A standby is up besides the holder (a kill while every standby still boots would measure a boot). */
    const standbyUp = async () => {
      const up = () =>
        [...gateways.keys()].filter((pid) => existsSync(path.join(stateDirs.get(pid) ?? "", "gateway.json")));
      await waitUntil(() => up().length >= 2, 30_000, 50);
    };
    for (let k = 0; k < opts.kills; k++) {
      await standbyUp();
      await sleep(opts.renewMs); // its first lease round is done
      const victim = await holderPid("telegram");
      if (victim === undefined) throw new Error(`kill ${k + 1}: no live gateway holds the telegram lease`);
      const heldDiscord = (await holderPid("discord")) === victim;
      discordPaused = true;
      // No Discord event in flight to the victim (see the header): every DM so far is answered. On a
      // loaded machine that can take seconds; a kill before it would lose the DM (as on Discord).
      const answered = await waitUntil(() => {
        const got = replies();
        return [...sentAt.keys()].every((t) => !t.startsWith("dc-") || got.has(t));
      }, 30_000);
      if (!answered) log(`kill ${k + 1}: discord DMs still unanswered after 30 s; killing anyway`);
      const child = gateways.get(victim) as ChildProcess;
      const identified = dc.identifies.length;
      const t0 = Date.now();
      process.kill(victim, "SIGKILL");
      // Until the fake saw the victim's socket close, a DM would go to the dead process (a loaded
      // machine can take a while to tear the process down).
      if (heldDiscord) await waitUntil(() => dc.liveConnections === 0, 10_000, 5);
      discordPaused = false;
      let tgAt: number | undefined;
      let dcAt: number | undefined;
      let tgConn: number | undefined;
      let dcConn: number | undefined;
      for (let i = 0; i < (boundMs + 8000) / 25; i++) {
        tgConn ??= tg.calls.find((c) => c.method === "getUpdates" && (c.at ?? 0) > t0)?.at;
        if (dcConn === undefined && dc.identifies.length > identified) dcConn = Date.now();
        tgAt ??= firstReplyAfter("tg", t0);
        dcAt ??= heldDiscord ? firstReplyAfter("dc", t0) : 0;
        if (tgAt !== undefined && dcAt !== undefined) break;
        await sleep(25);
      }
      if (tgAt === undefined) throw new Error(`kill ${k + 1}: telegram was not taken over`);
      takeoverMs.telegram.push(tgAt - t0);
      connectMs.telegram.push((tgConn ?? tgAt) - t0);
      if (heldDiscord) {
        if (dcAt === undefined) throw new Error(`kill ${k + 1}: discord was not taken over`);
        takeoverMs.discord.push(dcAt - t0);
        connectMs.discord.push((dcConn ?? dcAt) - t0);
      }
      if (process.env.CHAOS_DEBUG)
        for (const c of tg.calls)
          if ((c.at ?? 0) > t0 - 500 && (c.at ?? 0) < (tgAt ?? 0) + 100)
            log(`  tg ${c.method} +${(c.at ?? 0) - t0} ${String(c.payload.text ?? c.payload.offset ?? "")}`);
      log(
        `kill ${k + 1}: telegram polled again after ${(tgConn ?? tgAt) - t0} ms, first reply ${tgAt - t0} ms` +
          (heldDiscord
            ? `; discord identified after ${(dcConn ?? dcAt ?? 0) - t0} ms, first reply ${(dcAt ?? 0) - t0} ms`
            : ""),
      );
      await new Promise((res) =>
        child.exitCode !== null || child.signalCode !== null ? res(null) : child.once("exit", res),
      );
      launch();
    }
    await sleep(500);
    feeding = false;
    await feed;
    log("kills done: draining");
    // Drain: every message answered (bounded), then a moment for late duplicates.
    await waitUntil(
      () => {
        const got = replies();
        return [...sentAt.keys()].every((t) => got.has(t));
      },
      60_000,
      50,
    );
    log("drained");
    await sleep(1500);
    const got = replies();
    const missing = [...sentAt.keys()].filter((t) => !got.has(t));
    if (process.env.CHAOS_DEBUG) {
      for (const m of dc.sent)
        if (!/\bdc-\d+\b/.test(String(m.body.content)))
          log(`dc reply without token: ${JSON.stringify(m.body).slice(0, 200)}`);
      log(
        `dc sent ${dc.sent.length}, dc dispatched ${[...sentAt.keys()].filter((t) => t.startsWith("dc")).length}`,
      );
    }
    const duplicated = [...got].filter(([, v]) => v.length > 1).map(([t, v]) => `${t}×${v.length}`);
    return {
      kills: opts.kills,
      sent: sentAt.size,
      answered: [...sentAt.keys()].length - missing.length,
      missing,
      duplicated,
      resends,
      takeoverMs,
      connectMs,
      boundMs,
    };
  } finally {
    feeding = false;
    await feed.catch(() => undefined);
    await Promise.all([...gateways.values()].map((g) => stopByPid(g, "SIGTERM", 5000)));
    r.disconnect();
    await stopByPid(redis.proc, "SIGTERM", 3000);
    await tg.close();
    await dc.close();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** "n=10 min 2210 p50 2480 p90 2890 max 3010 ms". */
export function distribution(ms: readonly number[]): string {
  if (ms.length === 0) return "n=0";
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] as number;
  return `n=${s.length} min ${s[0]} p50 ${at(0.5)} p90 ${at(0.9)} max ${s.at(-1)} ms`;
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
  const kills = Number(process.env.CHAOS_TAKEOVER_KILLS ?? 10);
  const ttlMs = Number(process.env.CHAOS_TTL_MS ?? 2000);
  const renewMs = Number(process.env.CHAOS_RENEW_MS ?? 600);
  const f = await runTakeover({ kills, ttlMs, renewMs, log: (l) => console.error(l) });
  console.log(
    `takeover after SIGKILL of the holder (ttlMs ${ttlMs}, renewMs ${renewMs}, bound ${f.boundMs} ms):`,
  );
  console.log(`  kill → next reply      telegram ${distribution(f.takeoverMs.telegram)}`);
  console.log(`                         discord  ${distribution(f.takeoverMs.discord)}`);
  console.log(`  kill → connection held telegram ${distribution(f.connectMs.telegram)}`);
  console.log(`                         discord  ${distribution(f.connectMs.discord)}`);
  console.log(
    `  load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} on ${os.cpus().length} cores`,
  );
  console.log(
    JSON.stringify({
      kills: f.kills,
      sent: f.sent,
      answered: f.answered,
      missing: f.missing,
      duplicated: f.duplicated,
      resends: f.resends,
    }),
  );
  process.exitCode = f.missing.length === 0 && f.duplicated.length <= f.resends ? 0 : 1;
}
