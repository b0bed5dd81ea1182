import type {
  Delivery,
  DeliveryEdit,
  DeliveryOutcome,
  DeliveryRequest,
  ReplyStream,
} from "../services/index.js";
import type { SessionEntry } from "../store/types.js";
import { countDelivery } from "../telemetry/index.js";

/** Where a process without the channel queues a delivery for a gateway (handoff-bullmq.ts). */
export interface HandoffQueue {
  add(req: DeliveryRequest): Promise<void>;
}

/**
 * A worker's delivery: posts itself where it has the channel (never, today: workers run none),
 * and hands the rest to the gateways. Streaming previews need the channel here, so a worker's
 * turn posts its reply whole.
 */
export class HandoffDelivery implements Delivery {
  constructor(
    private readonly local: Delivery,
    private readonly handoff: HandoffQueue,
  ) {}

  async deliver(req: DeliveryRequest, session?: SessionEntry): Promise<DeliveryOutcome> {
    // the gateway that takes the hand-off reads the session itself; its delivery span is a child of
    // `req.traceparent` too
    const res = await this.local.deliver(req, session);
    if (res.status !== "no-route" || !res.missingChannel) return res;
    await this.handoff.add(req);
    countDelivery(res.missingChannel, "handed-off");
    return { status: "handed-off", channel: res.missingChannel };
  }

  async openStream(
    req: Pick<DeliveryRequest, "sessionKey" | "idempotencyKey" | "traceparent">,
    session?: SessionEntry,
  ): Promise<ReplyStream | null> {
    return (await this.local.openStream?.(req, session)) ?? null;
  }

  async edit(req: DeliveryEdit): Promise<boolean> {
    return (await this.local.edit?.(req)) ?? false;
  }
}
