import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { silentLogger } from "../../src/log.js";
import { createBullmqPipeline } from "../../src/pipeline/bullmq/index.js";
import type { TurnRequest } from "../../src/pipeline/types.js";
import type { RunRecord } from "../../src/store/types.js";
import { MemoryRunStore } from "../helpers/memory-store.js";
import { randomPrefix } from "../helpers.js";
import { describeRedis, ownRedis } from "../redis.js";

/**
 * Redis dies mid-run (SIGKILL) and comes back from its append-only file: every message whose
 * submitTurn resolved must still run to completion. The test owns its redis-server (a free port,
 * a temp dir, `appendfsync always` so an acknowledged write is on disk) and stops it at the end.
 */

describeRedis("bullmq pipeline: Redis restarted mid-run", () => {
  let redis: Awaited<ReturnType<typeof ownRedis>>;
  const url = () => redis.url;
  const startRedis = () => redis.start();
  const killRedis = () => redis.kill();

  beforeAll(async () => {
    redis = await ownRedis();
  }, 30_000);

  afterAll(async () => {
    await redis?.cleanup();
  }, 30_000);

  const turn = (sessionKey: string, text: string): TurnRequest => ({
    sessionKey,
    agentId: "main",
    text,
    deliver: false,
    origin: "inbound",
  });

  // The shared connection either queues commands until Redis is back, or fails fast (the composition
  // root's choice: no offline queue, one retry): then commits in flight fail, and the next drain
  // resumes those turns from `act`.
  const variants = [
    { name: "waiting connection", opts: { maxRetriesPerRequest: null } },
    { name: "fail-fast connection", opts: { maxRetriesPerRequest: 1, enableOfflineQueue: false } },
  ];
  for (const variant of variants) {
    it(`loses no accepted message when Redis is killed and restarted (${variant.name})`, async () => {
      const runs = new MemoryRunStore();
      const connection = new Redis(url(), variant.opts);
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
        // Like a client: a submission refused while the connection reconnects is sent again.
        for (let i = 0; ; i++) {
          const r = await pipeline.submitTurn(turn("s0", "after")).catch((err: unknown) => {
            if (i >= 100) throw err;
            return null;
          });
          if (r) {
            accepted.push(r);
            break;
          }
          await new Promise((res) => setTimeout(res, 50));
        }

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
