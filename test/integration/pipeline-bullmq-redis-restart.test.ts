import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { silentLogger } from "../../src/log.js";
import { createBullmqPipeline } from "../../src/pipeline/bullmq/index.js";
import type { TurnRequest } from "../../src/pipeline/types.js";
import type { RunRecord } from "../../src/store/types.js";
import { MemoryRunStore } from "../helpers/memory-store.js";
import { randomPrefix } from "../helpers.js";
import { describeRedis } from "../redis.js";

/**
 * Redis dies mid-run (SIGKILL) and comes back from its append-only file: every message whose
 * submitTurn resolved must still run to completion. The test owns its redis-server (a free port,
 * a temp dir, `appendfsync always` so an acknowledged write is on disk) and stops it at the end.
 */

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

describeRedis("bullmq pipeline: Redis restarted mid-run", () => {
  let dir = "";
  let port = 0;
  let server: ChildProcess | null = null;
  const url = () => `redis://127.0.0.1:${port}`;

  async function startRedis(): Promise<void> {
    const proc = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
      ].concat(["--save", "", "--dir", dir, "--maxmemory-policy", "noeviction"]),
      { stdio: "ignore" },
    );
    server = proc;
    const probe = new Redis(url(), { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    probe.on("error", () => {});
    for (let i = 0; i < 200; i++) {
      try {
        if (probe.status !== "ready") await probe.connect().catch(() => undefined);
        if ((await probe.ping()) === "PONG") break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    probe.disconnect();
  }

  async function killRedis(): Promise<void> {
    const proc = server;
    server = null;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGKILL");
    await exited;
  }

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "sb-redis-restart-"));
    port = await freePort();
    await startRedis();
  }, 30_000);

  afterAll(async () => {
    await killRedis();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  const turn = (sessionKey: string, text: string): TurnRequest => ({
    sessionKey,
    agentId: "main",
    text,
    deliver: false,
    origin: "inbound",
  });

  // Commands on the shared connection either wait for Redis to come back (null) or fail fast (1):
  // then commits in flight fail, and the turns are resumed from `act` by the next drain.
  for (const maxRetriesPerRequest of [null, 1]) {
    it(`loses no accepted message when Redis is killed and restarted (maxRetriesPerRequest ${maxRetriesPerRequest})`, async () => {
      const runs = new MemoryRunStore();
      const connection = new Redis(url(), { maxRetriesPerRequest });
      connection.on("error", () => {}); // expected while the server is down
      const pipeline = createBullmqPipeline({
        connection,
        createBlockingConnection: () => {
          const c = new Redis(url(), { maxRetriesPerRequest: null });
          c.on("error", () => {});
          return c;
        },
        prefix: randomPrefix("bullmq-restart"),
        runs,
        logger: silentLogger(),
        concurrency: 4,
        mode: "followup",
        lockDurationMs: 1000,
        stalledIntervalMs: 1000,
        sweepIntervalMs: 500,
        reconnectRetryMs: 100,
      });
      try {
        let handled = 0;
        let firstTen!: () => void;
        const tenDone = new Promise<void>((r) => {
          firstTen = r;
        });
        await pipeline.start({
          turn: async (job) => {
            await new Promise((r) => setTimeout(r, 10));
            if (++handled === 10) firstTen();
            return { status: "ok", reply: `done:${job.messages[0]!.text}` };
          },
          background: async () => {},
        });
        const before = await Promise.all(
          Array.from({ length: 120 }, (_, i) => pipeline.submitTurn(turn(`s${i % 12}`, `before-${i}`))),
        );
        await tenDone;
        await killRedis(); // mid-run: turns in flight, most still queued
        const finishedAtKill = (await Promise.all(before.map((r) => runs.get(r.runId)))).filter(
          (r) => r?.status === "ok",
        ).length;
        expect(finishedAtKill).toBeLessThan(before.length);
        // Submitted while Redis is down: accepted only if (and once) they resolve.
        const during = Array.from({ length: 12 }, (_, i) =>
          pipeline.submitTurn(turn(`s${i}`, `during-${i}`)),
        );
        await new Promise((r) => setTimeout(r, 300));
        await startRedis();
        const accepted: RunRecord[] = [...before];
        for (const d of await Promise.allSettled(during))
          if (d.status === "fulfilled") accepted.push(d.value);
        accepted.push(await pipeline.submitTurn(turn("s0", "after")));

        const finals = await Promise.all(accepted.map((r) => pipeline.wait(r.runId, 30_000)));
        expect(finals.filter((f) => f?.status !== "ok")).toEqual([]);
        for (const [i, f] of finals.slice(0, before.length).entries())
          expect(f?.reply).toBe(`done:before-${i}`);
      } finally {
        await pipeline.stop(200);
        connection.disconnect();
      }
    }, 60_000);
  }
});
