import { existsSync, lstatSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { ConfiguredModels } from "../agent/models.js";
import { createChannels, openStore } from "../app/index.js";
import type { ChannelAdapter } from "../channels/types.js";
import { loadConfig } from "../config/load.js";
import { type Config, cronJobSchema } from "../config/schema.js";
import { cronChecks } from "../cron/checks.js";
import { errorMessage } from "../errors.js";
import { silentLogger } from "../log.js";
import { PairingStore } from "../routing/pairing.js";
import type { CronJob } from "../services/cron.js";
import { CRON_JOBS_NS } from "../store/kv-namespaces.js";
import { clientFor } from "./context.js";

/** `switchboard doctor`: every check prints ok / warn / fail with what to do about it. */

export interface Check {
  name: string;
  status: "ok" | "warn" | "fail";
  message: string;
}

/** Redis facts that matter for the bullmq/redis drivers (shared with start-up checks). */
export async function checkRedis(url: string, timeoutMs = 2000): Promise<Check[]> {
  const { Redis } = await import("ioredis");
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
  });
  client.on("error", () => {});
  const checks: Check[] = [];
  try {
    await client.connect();
    const info = await client.info();
    const version = /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown";
    checks.push({ name: "redis", status: "ok", message: `reachable at ${url} (Redis ${version})` });
    const major = Number(version.split(".")[0]);
    if (major && major < 6)
      checks.push({
        name: "redis.version",
        status: "fail",
        message: `Redis ${version} is too old; BullMQ needs 6.2 or newer`,
      });
    const policy = ((await client.config("GET", "maxmemory-policy")) as string[])[1] ?? "unknown";
    checks.push(
      policy === "noeviction"
        ? { name: "redis.maxmemory-policy", status: "ok", message: "noeviction" }
        : {
            name: "redis.maxmemory-policy",
            status: "fail",
            message: `${policy}: Redis may evict queue and session keys; set maxmemory-policy noeviction`,
          },
    );
    const aof = ((await client.config("GET", "appendonly")) as string[])[1];
    const save = ((await client.config("GET", "save")) as string[])[1];
    const fsync = ((await client.config("GET", "appendfsync")) as string[])[1];
    checks.push(
      aof === "yes" && fsync === "always"
        ? { name: "redis.persistence", status: "ok", message: "appendonly yes, appendfsync always" }
        : aof === "yes"
          ? {
              name: "redis.persistence",
              status: "warn",
              message: `appendonly yes, appendfsync ${fsync ?? "?"}: a crash of the Redis host can lose the last second of acknowledged messages; set appendfsync always`,
            }
          : {
              name: "redis.persistence",
              status: "warn",
              message: `appendonly ${aof ?? "?"}, appendfsync ${fsync ?? "?"}, save "${save ?? ""}": a Redis restart can lose accepted messages; set appendonly yes and appendfsync always`,
            },
    );
  } catch (err) {
    checks.push({
      name: "redis",
      status: "fail",
      message: `cannot reach Redis at ${url}: ${errorMessage(err)}`,
    });
  } finally {
    client.disconnect();
  }
  return checks;
}

/** Entries checked at most (a state dir with a million transcripts is still walked in bounded time). */
const MAX_PERMISSION_CHECKS = 200_000;

/**
 * Every directory under the state dir must be 0700 and every file 0600 (they hold message text,
 * tokens and pairing codes): names the first wrong paths and how many there are.
 */
export function checkStateDirPermissions(dir: string): Check {
  const wrong: string[] = [];
  let count = 0;
  let checked = 0;
  const stack = [dir];
  while (stack.length > 0 && checked < MAX_PERMISSION_CHECKS) {
    const d = stack.pop()!;
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      continue;
    }
    for (const name of names) {
      const p = path.join(d, name);
      let st: ReturnType<typeof lstatSync>;
      try {
        st = lstatSync(p);
      } catch {
        continue;
      }
      checked++;
      const mode = st.mode & 0o777;
      if (st.isDirectory()) {
        if (mode & 0o077) {
          count++;
          if (wrong.length < 5) wrong.push(`${p} (dir, mode ${mode.toString(8)}; expected 700)`);
        }
        stack.push(p);
      } else if (st.isFile() && mode & 0o077) {
        count++;
        if (wrong.length < 5) wrong.push(`${p} (file, mode ${mode.toString(8)}; expected 600)`);
      }
    }
  }
  if (count === 0) {
    return { name: "stateDir.permissions", status: "ok", message: `${checked} paths private (700/600)` };
  }
  return {
    name: "stateDir.permissions",
    status: "warn",
    message: `${count} path(s) readable by other users: ${wrong.join(", ")}${count > wrong.length ? ", …" : ""} (fix: chmod -R go-rwx ${dir})`,
  };
}

function checkStateDir(dir: string): Check {
  try {
    const st = statSync(dir);
    const mode = st.mode & 0o777;
    if (mode & 0o077)
      return {
        name: "stateDir",
        status: "warn",
        message: `${dir} has mode ${mode.toString(8)}; expected 700 (run chmod 700 ${dir})`,
      };
    return { name: "stateDir", status: "ok", message: `${dir} (mode 700)` };
  } catch {
    return {
      name: "stateDir",
      status: "ok",
      message: `${dir} does not exist yet; it is created with mode 700 on start`,
    };
  }
}

/**
 * Long polling (and every live connection) belongs to one process per account: Telegram answers a
 * second poller 409 Conflict. The gateway retries a 409 with backoff (health shows the account
 * `reconnecting` with "409 conflict"); with the redis store the gateways share the account by lease.
 */
function pollingCheck(config: Config, name: string): Check {
  if (config.storage.driver === "redis")
    return {
      name: `${name} polling`,
      status: "ok",
      message:
        "long polling under a lease: one gateway polls, the others stand by and take over within ttlMs + renewMs (health: heldBy, lease)",
    };
  return {
    name: `${name} polling`,
    status: "ok",
    message:
      "long polling: run one gateway per bot token. A second poller on the token (another gateway, a dev copy) makes Telegram answer 409 Conflict; " +
      'both keep retrying with backoff (health: reconnecting, "409 conflict") and take turns. For several gateways use storage.driver "redis" (leases)',
  };
}

function checkChannels(config: Config): Check[] {
  const out: Check[] = [];
  const ch = config.channels;
  for (const [id, a] of Object.entries(ch.telegram?.accounts ?? {})) {
    out.push({
      name: `telegram:${id}`,
      status: a.token ? "ok" : "fail",
      message: a.token ? "token present" : "token missing",
    });
    if (a.mode === "webhook" && !a.webhookSecret) {
      out.push({ name: `telegram:${id}`, status: "fail", message: "webhook mode needs webhookSecret" });
    }
    if (a.mode !== "webhook") out.push(pollingCheck(config, `telegram:${id}`));
  }
  for (const [id, a] of Object.entries(ch.slack?.accounts ?? {})) {
    const missing =
      a.mode === "socket"
        ? !a.appToken
          ? "appToken (Socket Mode)"
          : ""
        : !a.signingSecret
          ? "signingSecret (HTTP mode)"
          : "";
    out.push({
      name: `slack:${id}`,
      status: missing ? "fail" : "ok",
      message: missing ? `${missing} missing` : "credentials present",
    });
  }
  for (const [id, a] of Object.entries(ch.discord?.accounts ?? {})) {
    out.push({
      name: `discord:${id}`,
      status: a.token ? "ok" : "fail",
      message: a.token ? "token present" : "token missing",
    });
  }
  for (const id of Object.keys(ch.whatsapp?.accounts ?? {})) {
    out.push({ name: `whatsapp:${id}`, status: "ok", message: "linked by QR code on start (see README)" });
  }
  return out;
}

const CHAT_CHANNELS = ["telegram", "slack", "discord", "whatsapp"] as const;

/** Who may DM each configured chat channel (API.md §7); `open` with a shared main session is a warning. */
export function checkDmAccess(config: Config): Check[] {
  const out: Check[] = [];
  for (const name of CHAT_CHANNELS) {
    const c = config.channels[name];
    if (!c) continue;
    const everyone = c.dmPolicy === "open" || c.allowFrom.includes("*");
    const who = `dmPolicy ${c.dmPolicy}, allowFrom [${c.allowFrom.join(", ")}], owners [${c.owners.join(", ")}]`;
    if (everyone && config.session.dmScope === "main")
      out.push({
        name: `${name}.dmPolicy`,
        status: "warn",
        message: `${who}: anyone who DMs the bot shares the owner's main session (and can read its history); use dmPolicy "pairing" or session.dmScope "per-channel-peer"`,
      });
    else out.push({ name: `${name}.dmPolicy`, status: "ok", message: who });
  }
  return out;
}

/** Pairing approvals and pending requests, from the running gateway or else the local store. */
async function checkPairing(loaded: ReturnType<typeof loadConfig>, configFile?: string): Promise<Check[]> {
  type Listed = {
    requests: Array<{ channel: string; senderId: string; code: string }>;
    approved: Array<{ channel: string; accountId: string; senderId: string }>;
  };
  let res: Listed;
  try {
    res = await clientFor(configFile ? { config: configFile } : {}).call<Listed>("pairing.list", {});
  } catch {
    try {
      const local = await openStore(loaded, silentLogger());
      try {
        const store = new PairingStore(local.store.kv, Date.now);
        res = { requests: await store.pending(), approved: await store.approved() };
      } finally {
        await local.close();
      }
    } catch (err) {
      return [{ name: "pairing", status: "warn", message: `could not read approvals: ${errorMessage(err)}` }];
    }
  }
  const approved = res.approved.map((a) => `${a.channel}:${a.senderId}`);
  const out: Check[] = [
    {
      name: "pairing",
      status: "ok",
      message: approved.length ? `approved senders: ${approved.join(", ")}` : "no approved senders",
    },
  ];
  if (res.requests.length)
    out.push({
      name: "pairing.pending",
      status: "ok",
      message: `${res.requests.length} pending: ${res.requests.map((r) => `${r.channel} ${r.code} (sender ${r.senderId})`).join(", ")}; approve with switchboard pairing approve CHANNEL CODE`,
    });
  return out;
}

/** Calls each configured account's identity method (getMe, auth.test, users/@me). */
async function probeChannels(loaded: ReturnType<typeof loadConfig>): Promise<Check[]> {
  const out: Check[] = [];
  let adapters: ChannelAdapter[];
  try {
    const stateDir = path.resolve(loaded.baseDir, loaded.config.stateDir);
    adapters = (await createChannels(loaded.config, silentLogger(), { stateDir, baseDir: loaded.baseDir }))
      .adapters;
  } catch (err) {
    return [{ name: "channels", status: "fail", message: errorMessage(err) }];
  }
  for (const a of adapters) {
    if (!a.probe) continue;
    const r = await Promise.race([
      a.probe(),
      new Promise<{ ok: boolean; detail: string }>((resolve) =>
        setTimeout(() => resolve({ ok: false, detail: "no answer within 10 s" }), 10_000).unref(),
      ),
    ]);
    out.push({ name: `${a.channel}:${a.accountId}`, status: r.ok ? "ok" : "fail", message: r.detail });
  }
  return out;
}

/** Jobs created at run time, read from the store; null while a gateway holds it (fs lock). */
async function runtimeCronJobs(loaded: ReturnType<typeof loadConfig>): Promise<CronJob[] | null> {
  try {
    const { openStore } = await import("../app/index.js");
    const { store, close } = await openStore(loaded, silentLogger());
    try {
      const out: CronJob[] = [];
      for (const { value } of await store.kv.list<{ job: unknown }>(CRON_JOBS_NS)) {
        const p = cronJobSchema.safeParse(value.job);
        if (p.success) out.push(p.data);
      }
      return out;
    } finally {
      await close();
    }
  } catch {
    return null;
  }
}

export async function doctorChecks(configFile?: string): Promise<Check[]> {
  const checks: Check[] = [];
  let loaded: ReturnType<typeof loadConfig>;
  try {
    loaded = loadConfig(configFile ? { file: configFile } : {});
    checks.push({
      name: "config",
      status: "ok",
      message: loaded.source ?? "no config file: built-in defaults",
    });
  } catch (err) {
    checks.push({ name: "config", status: "fail", message: errorMessage(err) });
    return checks;
  }
  const { config } = loaded;
  const stateDir = path.resolve(loaded.baseDir, config.stateDir);
  checks.push(checkStateDir(stateDir));
  if (existsSync(stateDir)) checks.push(checkStateDirPermissions(stateDir));
  const urls = new Set<string>();
  if (config.storage.driver === "redis") urls.add(config.storage.redisUrl);
  if (config.queue.driver === "bullmq") urls.add(config.queue.redisUrl);
  for (const url of urls) checks.push(...(await checkRedis(url)));
  checks.push(...checkChannels(config));
  checks.push(...cronChecks(config, await runtimeCronJobs(loaded)));
  checks.push(...checkDmAccess(config));
  checks.push(...(await checkPairing(loaded, configFile)));
  checks.push(...(await probeChannels(loaded)));
  try {
    const models = new ConfiguredModels(config, silentLogger(), loaded.baseDir);
    if (models.demo)
      checks.push({
        name: "model",
        status: "warn",
        message: "no model configured: the scripted demo model answers (set models.default)",
      });
    for (const p of models.providers()) {
      if (!p.ping) continue;
      const r = await p.ping().catch((err: unknown) => ({ ok: false, message: errorMessage(err) }));
      checks.push({ name: `model:${p.id}`, status: r.ok ? "ok" : "warn", message: r.message });
    }
  } catch (err) {
    checks.push({ name: "model", status: "fail", message: errorMessage(err) });
  }
  return checks;
}

export async function runDoctor(
  opts: { config?: string; json?: boolean },
  io: { out: (s: string) => void; err: (s: string) => void },
): Promise<number> {
  const checks = await doctorChecks(opts.config);
  // a config error already reads "config: <path>: …"
  const text = (c: Check) => (c.message.startsWith(`${c.name}: `) ? c.message : `${c.name}: ${c.message}`);
  if (opts.json) io.out(JSON.stringify({ checks }, null, 2));
  else
    for (const c of checks)
      io.out(`${c.status === "ok" ? "ok  " : c.status === "warn" ? "warn" : "FAIL"}  ${text(c)}`);
  // The report stays whole on stdout; what failed is also an error on stderr (API.md §2).
  const failed = checks.filter((c) => c.status === "fail");
  if (failed.length === 0) return 0;
  io.err(
    `switchboard doctor: ${failed.length} check${failed.length === 1 ? "" : "s"} failed\n${failed
      .map((c) => `  ${text(c)}`)
      .join("\n")}`,
  );
  return 1;
}
