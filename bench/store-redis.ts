/**
 * redis store benchmark (DESIGN.md budgets): `list({ limit: 200 })` over 100,000 sessions and
 * `readTail({ limit: 100 })` on a 1,000,000-message stream, plus what the data costs in Redis
 * memory. Runs against REDIS_URL (default redis://127.0.0.1:6379) under a random prefix and
 * removes every key it wrote.
 *
 * Sessions are written through the driver's own write path (`sessions.put`, i.e. the
 * putSession-6 script, many in flight at once so they pipeline); the transcript through
 * `transcripts.appendBatch` (the same stream layout as `append`, one pipeline per batch).
 *
 *   npx tsx bench/store-redis.ts          # prints a table and one {"bench":"store-redis",…} line
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";
import { Redis } from "ioredis";
import { silentLogger } from "../src/log.js";
import { createRedisStore, type RedisStore } from "../src/store/redis/index.js";
import type { SessionEntry, TranscriptMessage, TranscriptRef } from "../src/store/types.js";
import { DEPLOYED_ENV, DEPLOYED_NODE_FLAGS } from "./deployed.js";

/** SB_BENCH_SESSIONS=1000000 runs the scale figures (issue 18: 1M sessions). */
const SESSIONS = Number(process.env.SB_BENCH_SESSIONS ?? 100_000);
const K = SESSIONS >= 1_000_000 ? `${SESSIONS / 1_000_000}M` : `${Math.round(SESSIONS / 1000)}k`;
const MESSAGES = 1_000_000;
const AGENTS = ["main", "research", "ops", "support", "dev"];
const REF: TranscriptRef = { agentId: "main", sessionId: "bench-transcript" };
const ITERATIONS = 200;
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

interface Stat {
  medianMs: number;
  p99Ms: number;
}

export interface StoreRedisBenchResult {
  bench: "store-redis";
  sessions: number;
  messages: number;
  loadSessionsMs: number;
  loadTranscriptMs: number;
  list: Stat;
  listAgent: Stat;
  listKindsGroup: Stat;
  listActive60: Stat;
  readTail: Stat;
  readTailNoTools: Stat;
  count: Stat;
  redisSessionsMb: number;
  redisTranscriptMb: number;
  readTailRssDeltaMb: number;
  /** This process's RSS at the end: it generated the data, so its heap holds the generator's. */
  rssMb: number;
  /** A fresh process, flagged as `npm start` runs the gateway, after opening the store and listing. */
  gatewayRssMb: number | null;
  gatewayListFirstMs: number | null;
  totalMs: number;
}

interface ChildFigures {
  rssMb: number;
  listFirstMs: number;
  listMedianMs: number;
}

/**
 * The gateway side in a process of its own (SB_BENCH_REDIS_CHILD=<prefix>): opens the store on
 * the prefix the parent filled, lists (first call, then 200 more) and reads a tail, and prints
 * its figures as one JSON line. Under `npx tsx` the child runs with tsx too (~35 MB more).
 */
async function child(prefix: string): Promise<void> {
  const client = new Redis(REDIS_URL, { maxRetriesPerRequest: 3 });
  const store = await createRedisStore({ client, prefix, logger: silentLogger() });
  v8.setFlagsFromString("--heap-growing-percent=20"); // as a started gateway does (src/cli/serve.ts)
  const t0 = performance.now();
  if ((await store.sessions.list({ limit: 200 })).length !== 200) throw new Error("bench child: short list");
  const listFirstMs = performance.now() - t0;
  const list = await stat(() => store.sessions.list({ limit: 200 }));
  await stat(() => store.sessions.list({ kinds: ["group"], limit: 200 }));
  await stat(() => store.transcripts.readTail(REF, { limit: 100, includeTools: true }));
  const figures: ChildFigures = {
    rssMb: mb(process.memoryUsage().rss),
    listFirstMs: round(listFirstMs),
    listMedianMs: list.medianMs,
  };
  console.log(JSON.stringify(figures));
  await store.close();
  await client.quit();
}

function measureInChild(prefix: string): ChildFigures | null {
  const r = spawnSync(
    process.execPath,
    // flagged as deployed (bench/deployed.ts), so its memory is measured as users see it
    [...process.execArgv, ...DEPLOYED_NODE_FLAGS, fileURLToPath(import.meta.url)],
    {
      env: { ...process.env, ...DEPLOYED_ENV, SB_BENCH_REDIS_CHILD: prefix },
      encoding: "utf8",
      timeout: 300_000,
    },
  );
  const line = r.stdout?.trim().split("\n").at(-1);
  try {
    return line ? (JSON.parse(line) as ChildFigures) : null;
  } catch {
    console.log(`store-redis bench: the gateway-side child failed: ${r.stderr?.slice(0, 500)}`);
    return null;
  }
}

function sessionEntry(i: number, now: number): SessionEntry {
  const agentId = AGENTS[i % AGENTS.length]!;
  const shape = i % 4;
  const key =
    shape === 0
      ? `agent:${agentId}:telegram:group:-100${i}`
      : shape === 1
        ? `agent:${agentId}:direct:user${i}`
        : shape === 2
          ? `agent:${agentId}:subagent:${randomUUID()}`
          : `agent:${agentId}:slack:channel:c${i}`;
  // updatedAt spread over 30 days in random order, so the index really has to sort
  const updatedAt = now - Math.floor(Math.random() * 30 * 24 * 3600_000);
  const e: SessionEntry = {
    key,
    sessionId: randomUUID(),
    agentId,
    createdAt: updatedAt - 3600_000,
    updatedAt,
    channel: "telegram",
    chatType: shape === 1 ? "direct" : "group",
    displayName: `Conversation ${i}`,
    lastChannel: "telegram",
    lastTo: String(100_000 + i),
    lastAccountId: "default",
    deliveryContext: { channel: "telegram", to: String(100_000 + i), accountId: "default" },
    contextTokens: 128_000,
    totalTokens: 1000 + i,
    inputTokens: 700 + i,
    outputTokens: 300,
    model: "openai/gpt-4.1",
  };
  if (shape === 2) {
    e.spawnedBy = `agent:${agentId}:main`;
    e.spawnDepth = 1;
    e.label = `worker-${i}`;
  }
  return e;
}

function message(i: number, base: number): TranscriptMessage {
  const roles = ["user", "assistant", "toolCall", "toolResult"] as const;
  const role = roles[i % 4]!;
  const content =
    role === "toolCall"
      ? { name: "sessions_list", args: { limit: 10 } }
      : role === "toolResult"
        ? { ok: true, rows: i % 7 }
        : `message ${i}: the quick brown fox jumps over the lazy dog, again and again and again.`;
  const m: TranscriptMessage = {
    id: `m${i}`,
    sessionId: REF.sessionId,
    role,
    content,
    timestamp: base + i * 1000,
  };
  if (role === "assistant") m.usage = { input: 120, output: 45 };
  return m;
}

async function loadSessions(store: RedisStore): Promise<number> {
  const t = performance.now();
  const now = Date.now();
  const BATCH = 2000;
  for (let i = 0; i < SESSIONS; i += BATCH) {
    const puts: Array<Promise<void>> = [];
    for (let k = i; k < Math.min(SESSIONS, i + BATCH); k++)
      puts.push(store.sessions.put(sessionEntry(k, now)));
    await Promise.all(puts);
  }
  return performance.now() - t;
}

async function loadTranscript(store: RedisStore): Promise<number> {
  const t = performance.now();
  const base = Date.now() - MESSAGES * 1000;
  const BATCH = 5000;
  for (let i = 0; i < MESSAGES; i += BATCH) {
    const batch: TranscriptMessage[] = [];
    for (let k = i; k < Math.min(MESSAGES, i + BATCH); k++) batch.push(message(k, base));
    await store.transcripts.appendBatch(REF, batch);
  }
  return performance.now() - t;
}

const mb = (bytes: number) => Math.round((bytes / (1024 * 1024)) * 10) / 10;
const round = (ms: number) => Math.round(ms * 1000) / 1000;

async function stat(fn: () => Promise<unknown>): Promise<Stat> {
  await fn(); // warm the path once (JIT); the first call is not a cold-cache case for Redis
  const times: number[] = [];
  for (let i = 0; i < ITERATIONS; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return {
    medianMs: round(times[Math.floor(times.length / 2)]!),
    p99Ms: round(times[Math.min(times.length - 1, Math.floor(times.length * 0.99))]!),
  };
}

async function usedMemory(client: Redis): Promise<number> {
  const info = await client.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}

async function unlinkAll(client: Redis, pattern: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await client.scan(cursor, "MATCH", pattern, "COUNT", 5000);
    if (keys.length > 0) await client.unlink(...keys);
    cursor = next;
  } while (cursor !== "0");
}

export async function run(): Promise<StoreRedisBenchResult | null> {
  const started = performance.now();
  const client = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 3,
    retryStrategy: () => null,
  });
  client.on("error", () => {});
  try {
    await client.connect();
  } catch {
    console.log(`store-redis bench: no Redis at ${REDIS_URL}, skipped`);
    client.disconnect();
    return null;
  }
  const prefix = `sbbench:redis:${Math.random().toString(36).slice(2, 10)}`;
  const store = await createRedisStore({ client, prefix, logger: silentLogger() });
  let result: StoreRedisBenchResult;
  try {
    const mem0 = await usedMemory(client);
    const loadSessionsMs = await loadSessions(store);
    const mem1 = await usedMemory(client);
    const loadTranscriptMs = await loadTranscript(store);
    const mem2 = await usedMemory(client);
    if ((await store.sessions.count()) !== SESSIONS) throw new Error("bench: sessions missing");
    if ((await store.transcripts.count(REF)) !== MESSAGES) throw new Error("bench: messages missing");

    const list = await stat(async () => {
      if ((await store.sessions.list({ limit: 200 })).length !== 200) throw new Error("bench: short list");
    });
    const listAgent = await stat(() => store.sessions.list({ agentId: "research", limit: 200 }));
    const listKindsGroup = await stat(() => store.sessions.list({ kinds: ["group"], limit: 200 }));
    const listActive60 = await stat(() => store.sessions.list({ activeMinutes: 60, limit: 200 }));

    (globalThis as { gc?: () => void }).gc?.();
    const rssBeforeTail = process.memoryUsage().rss;
    const readTail = await stat(() => store.transcripts.readTail(REF, { limit: 100, includeTools: true }));
    const readTailNoTools = await stat(() => store.transcripts.readTail(REF, { limit: 100 }));
    const readTailRssDelta = process.memoryUsage().rss - rssBeforeTail;
    const last = await store.transcripts.readTail(REF, { limit: 1 });
    if (last[0]?.id !== `m${MESSAGES - 3}`) throw new Error(`bench: unexpected last message ${last[0]?.id}`);
    const count = await stat(() => store.transcripts.count(REF));
    const side = measureInChild(prefix);

    result = {
      bench: "store-redis",
      sessions: SESSIONS,
      messages: MESSAGES,
      loadSessionsMs: Math.round(loadSessionsMs),
      loadTranscriptMs: Math.round(loadTranscriptMs),
      list,
      listAgent,
      listKindsGroup,
      listActive60,
      readTail,
      readTailNoTools,
      count,
      redisSessionsMb: mb(mem1 - mem0),
      redisTranscriptMb: mb(mem2 - mem1),
      readTailRssDeltaMb: mb(readTailRssDelta),
      rssMb: mb(process.memoryUsage().rss),
      gatewayRssMb: side?.rssMb ?? null,
      gatewayListFirstMs: side?.listFirstMs ?? null,
      totalMs: 0,
    };
  } finally {
    await store.close();
    await unlinkAll(client, store.keys.pattern());
    await client.quit();
  }
  result.totalMs = Math.round(performance.now() - started);
  printTable(result);
  console.log(JSON.stringify(result));
  return result;
}

function printTable(r: StoreRedisBenchResult): void {
  const st = (s: Stat) => `${s.medianMs} / ${s.p99Ms} ms`;
  const rows: Array<[string, string, string]> = [
    [`load ${K} sessions via sessions.put`, `${r.loadSessionsMs} ms`, ""],
    ["load 1M-message stream via appendBatch", `${r.loadTranscriptMs} ms`, ""],
    ["list limit 200: median / p99", st(r.list), "median ≤ 20 ms"],
    ["list agentId limit 200: median / p99", st(r.listAgent), ""],
    ["list kinds=group limit 200: median / p99", st(r.listKindsGroup), ""],
    ["list activeMinutes=60 limit 200: median / p99", st(r.listActive60), ""],
    ["readTail limit 100 (tools): median / p99", st(r.readTail), "median ≤ 10 ms"],
    ["readTail limit 100 (no tools): median / p99", st(r.readTailNoTools), "median ≤ 10 ms"],
    ["count (XLEN) 1M: median / p99", st(r.count), ""],
    [`Redis memory: ${K} sessions + indexes`, `${r.redisSessionsMb} MB`, ""],
    ["Redis memory: 1M-message stream", `${r.redisTranscriptMb} MB`, ""],
    ["readTail RSS delta (client)", `${r.readTailRssDeltaMb} MB`, "≤ 50 MB"],
    [
      "gateway-side RSS (fresh process, store opened, lists and a tail read)",
      `${r.gatewayRssMb ?? "n/a"} MB`,
      "≤ 120 MB, not growing with sessions",
    ],
    ["gateway-side first list limit 200", `${r.gatewayListFirstMs ?? "n/a"} ms`, "≤ 50 ms"],
    ["this process's RSS (it generated the data)", `${r.rssMb} MB`, ""],
    ["total bench time (incl. cleanup)", `${r.totalMs} ms`, ""],
  ];
  const w0 = Math.max(...rows.map((x) => x[0].length));
  const w1 = Math.max(...rows.map((x) => x[1].length));
  console.log(
    `\nstore-redis bench (${r.sessions.toLocaleString("en")} sessions, ${r.messages.toLocaleString("en")} messages)`,
  );
  console.log(`${"measure".padEnd(w0)}  ${"value".padStart(w1)}  budget`);
  for (const [a, b, c] of rows) console.log(`${a.padEnd(w0)}  ${b.padStart(w1)}  ${c}`);
}

const isMain =
  process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
const childPrefix = process.env.SB_BENCH_REDIS_CHILD;
if (isMain && childPrefix) {
  child(childPrefix).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else if (isMain) {
  run().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
