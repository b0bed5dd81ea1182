import type { Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import { within } from "../retry/index.js";

/**
 * Closing Redis clients and BullMQ parts without hanging. ioredis `quit()` on a client that is
 * not connected may never settle, and BullMQ's graceful close waits for its blocking connection
 * to end, which never happens while that connection is between reconnect attempts. Every close
 * here is bounded; past the bound the connection is dropped.
 */

/** How long a graceful `QUIT` may take before the socket is dropped. */
const QUIT_MS = 1000;
/** Upper bound for BullMQ's own close (a safety net once our jobs are done). */
const CLOSE_MS = 10_000;

/** QUIT when connected (bounded), else drop the connection. */
export async function closeClient(client: Redis, ms = QUIT_MS): Promise<void> {
  if (client.status === "ready") {
    const quit = client.quit().then(
      () => true,
      () => false,
    );
    if (await within(quit, ms)) return;
  }
  client.disconnect();
}

/**
 * Closes a BullMQ worker: graceful when its blocking connection is up and `force` is not set,
 * forced otherwise; bounded either way.
 */
export async function closeWorker(worker: Worker, logger: Logger, force = false): Promise<void> {
  const blocking = await within(worker.backend.blockingClient ?? Promise.resolve(undefined), QUIT_MS);
  const closing = worker.close(force || blocking?.status !== "ready").then(
    () => true,
    (err: unknown) => {
      logger.warn({ err: errorMessage(err) }, "bullmq worker close failed");
      return true;
    },
  );
  if (!(await within(closing, CLOSE_MS))) logger.warn("bullmq worker did not close in time; dropping it");
}

/** A BullMQ consumer's parts in stop order: its worker, the worker's own blocking client, the queue. */
export async function closeConsumer(
  parts: { worker: Worker | null; blocking: Redis | null; queue: Queue },
  logger: Logger,
): Promise<void> {
  if (parts.worker) await closeWorker(parts.worker, logger);
  if (parts.blocking) await closeClient(parts.blocking);
  await closeQueue(parts.queue, logger);
}

/** Closes a BullMQ queue (it does not own its shared connection); bounded. */
export async function closeQueue(queue: Queue, logger: Logger): Promise<void> {
  const closing = queue.close().then(
    () => true,
    (err: unknown) => {
      logger.warn({ err: errorMessage(err) }, "bullmq queue close failed");
      return true;
    },
  );
  if (!(await within(closing, CLOSE_MS))) logger.warn("bullmq queue did not close in time");
}
