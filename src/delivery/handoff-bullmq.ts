import { createHash } from "node:crypto";
import { type Job, Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { z } from "zod";
import { errorMessage } from "../errors.js";
import type { Identical } from "../exact.js";
import type { Logger } from "../log.js";
import { closeConsumer } from "../redis/close.js";
import type { DeliveryOutcome, DeliveryRequest } from "../services/index.js";
import type { HandoffQueue } from "./handoff.js";

/**
 * Deliveries from processes that run no channels (`switchboard worker` on the bullmq pipeline).
 * A worker runs turns but holds no Telegram/Slack/… connection, so its delivery finds no adapter;
 * instead of dropping the reply as "no-route", it hands the request to the gateways over a BullMQ
 * queue (`deliver`), durable in Redis. A gateway takes it and posts it through its own delivery,
 * with the same idempotency key: the outbox still posts each key once, however often the job runs.
 * A gateway that has no such channel either (or a failed send) lets BullMQ retry, with backoff.
 */

export const HANDOFF_QUEUE = "deliver";
const ATTEMPTS = 8;

const requestSchema = z.object({
  sessionKey: z.string().min(1),
  text: z.string(),
  idempotencyKey: z.string().min(1),
  route: z
    .object({
      channel: z.string().min(1),
      to: z.string().min(1),
      accountId: z.string().optional(),
      threadId: z.string().optional(),
    })
    .optional(),
  bypassPolicy: z.boolean().optional(),
  kind: z.enum(["reply", "failure"]).optional(),
  actions: z
    .array(
      z.object({
        id: z.string().min(1),
        label: z.string().min(1),
        style: z.enum(["primary", "success", "danger"]).optional(),
      }),
    )
    .max(10)
    .optional(),
  actionsFallback: z.string().optional(),
  traceparent: z.string().max(256).optional(),
  attachments: z
    .array(
      z.object({ mediaId: z.string().min(1), name: z.string().optional(), voice: z.boolean().optional() }),
    )
    .max(100)
    .optional(),
});

/**
 * The schema's output is exactly `DeliveryRequest` (every key, nested ones too): a field added to
 * the request but not to the schema fails the build here, instead of being stripped silently by
 * the parse on the BullMQ path (attachments, then actions, were lost that way).
 */
const schemaIsTheRequest: Identical<z.infer<typeof requestSchema>, DeliveryRequest> = true;
void schemaIsTheRequest;

/**
 * A handed-off job's data as the request it was queued from, or null when it does not parse. The
 * data is JSON (no undefined values) and the parse adds no keys, so it round-trips unchanged.
 */
export function parseHandoffRequest(data: unknown): DeliveryRequest | null {
  const parsed = requestSchema.safeParse(data);
  return parsed.success ? parsed.data : null;
}

/** The job id of a request: one job per idempotency key (BullMQ ids may not contain ":"). */
export function handoffJobId(idempotencyKey: string): string {
  return `d-${createHash("sha256").update(idempotencyKey).digest("hex").slice(0, 40)}`;
}

export interface HandoffOptions {
  /** Shared command connection (the composition root owns it). */
  connection: Redis;
  /** A new blocking connection for the consumer (closed here). */
  createBlockingConnection: () => Redis;
  /** BullMQ prefix (the queue's hash tag). */
  prefix: string;
  logger: Logger;
  /** A gateway that died mid-post is noticed after about lockDurationMs + stalledIntervalMs. */
  lockDurationMs: number;
  stalledIntervalMs: number;
}

export class DeliveryHandoff implements HandoffQueue {
  readonly #queue: Queue;
  #worker: Worker | null = null;
  #blocking: Redis | null = null;

  constructor(private readonly opts: HandoffOptions) {
    this.#queue = new Queue(HANDOFF_QUEUE, { connection: opts.connection, prefix: opts.prefix });
    this.#queue.on("error", (err) =>
      opts.logger.warn({ err: errorMessage(err) }, "delivery hand-off queue error"),
    );
  }

  /** Queues `req` for a gateway; the same idempotency key twice is one job. */
  async add(req: DeliveryRequest): Promise<void> {
    await this.#queue.add("deliver", req, {
      jobId: handoffJobId(req.idempotencyKey),
      attempts: ATTEMPTS,
      backoff: { type: "exponential", delay: 1000 },
      removeOnComplete: { count: 1000 },
      removeOnFail: { count: 1000 },
    });
  }

  /** Gateways: take handed-off requests and post them with `deliver` (the gateway's own delivery). */
  async consume(deliver: (req: DeliveryRequest) => Promise<DeliveryOutcome>): Promise<void> {
    if (this.#worker) return;
    const { logger } = this.opts;
    const blocking = this.opts.createBlockingConnection();
    this.#blocking = blocking;
    const worker = new Worker(
      HANDOFF_QUEUE,
      async (job: Job) => {
        const req = parseHandoffRequest(job.data);
        if (!req) {
          logger.warn({ jobId: job.id }, "delivery hand-off: malformed request dropped");
          return;
        }
        const res = await deliver(req);
        if (res.status === "failed" || res.status === "no-route") {
          // Another attempt (here or on another gateway) may succeed: BullMQ retries with backoff.
          throw new Error(res.status === "failed" ? res.error : res.reason);
        }
        if (res.status === "blocked")
          logger.info(
            { key: req.idempotencyKey, why: res.reason },
            "delivery hand-off: blocked by send policy",
          );
      },
      {
        connection: blocking,
        prefix: this.opts.prefix,
        concurrency: 16,
        lockDuration: this.opts.lockDurationMs,
        stalledInterval: this.opts.stalledIntervalMs,
        maxStalledCount: ATTEMPTS,
        autorun: false,
      },
    );
    worker.on("error", (err) => logger.warn({ err: errorMessage(err) }, "delivery hand-off worker error"));
    worker.on("failed", (job, err) =>
      logger.warn(
        { jobId: job?.id, attempt: job?.attemptsMade, err: errorMessage(err) },
        "delivery hand-off: not posted yet; retrying",
      ),
    );
    this.#worker = worker;
    worker
      .run()
      .catch((err: unknown) => logger.error({ err: errorMessage(err) }, "delivery hand-off worker stopped"));
    await worker.waitUntilReady();
  }

  async stop(): Promise<void> {
    const parts = { worker: this.#worker, blocking: this.#blocking, queue: this.#queue };
    this.#worker = null;
    this.#blocking = null;
    await closeConsumer(parts, this.opts.logger);
  }
}
