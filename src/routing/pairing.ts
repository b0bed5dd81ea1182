import { randomInt } from "node:crypto";
import { SwitchboardError } from "../errors.js";
import type { Services } from "../services/index.js";
import { PAIRING_APPROVED_NS, PAIRING_REQUESTS_NS } from "../store/kv-namespaces.js";
import type { KeyValueStore } from "../store/types.js";
import type { InboundCtx } from "./context.js";

/**
 * DM pairing (API.md §7, docs/security.md): an unknown DM sender on a channel with
 * `dmPolicy: "pairing"` gets a one-time code instead of the agent; the owner approves it
 * (`switchboard pairing approve CHANNEL CODE`, RPC `pairing.approve`, or `/pair CODE`). Requests
 * and approvals live in the store's key-value space, so both drivers keep them across restarts.
 */

/** Codes: 8 characters, upper case, without the look-alikes 0 O 1 I. */
export const CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
export const CODE_LENGTH = 8;
export const REQUEST_TTL_MS = 3600_000;
/** Pending requests per channel account; more are ignored until one expires or is decided. */
export const MAX_PENDING_PER_ACCOUNT = 3;

export interface PairingRequest {
  channel: string;
  accountId: string;
  senderId: string;
  code: string;
  createdAt: number;
  senderName?: string;
}

export interface PairingApproval {
  channel: string;
  accountId: string;
  senderId: string;
  code: string;
  createdAt: number;
  approvedAt: number;
}

export function generateCode(): string {
  let s = "";
  for (let i = 0; i < CODE_LENGTH; i++) s += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return s;
}

/** Codes are compared without case and surrounding space (people retype them). */
export function normalizeCode(code: string): string {
  return code.trim().toUpperCase();
}

const approvalKey = (channel: string, accountId: string, senderId: string) =>
  `${channel}:${accountId}:${senderId}`;

export class PairingStore {
  constructor(
    private readonly kv: KeyValueStore,
    private readonly now: () => number,
  ) {}

  /** Pending, unexpired requests (expired ones are removed on the way), oldest first. */
  async pending(channel?: string): Promise<PairingRequest[]> {
    const now = this.now();
    const out: PairingRequest[] = [];
    for (const { key, value } of await this.kv.list<PairingRequest>(PAIRING_REQUESTS_NS)) {
      if (now - value.createdAt >= REQUEST_TTL_MS) {
        await this.kv.delete(PAIRING_REQUESTS_NS, key);
        continue;
      }
      if (!channel || value.channel === channel) out.push(value);
    }
    return out.sort((a, b) => a.createdAt - b.createdAt);
  }

  async approved(channel?: string): Promise<PairingApproval[]> {
    const all = await this.kv.list<PairingApproval>(PAIRING_APPROVED_NS);
    return all
      .map((e) => e.value)
      .filter((v) => !channel || v.channel === channel)
      .sort((a, b) => a.approvedAt - b.approvedAt);
  }

  async isApproved(channel: string, accountId: string, senderId: string): Promise<boolean> {
    return (await this.kv.get(PAIRING_APPROVED_NS, approvalKey(channel, accountId, senderId))) !== null;
  }

  /**
   * The request for this sender: `created` only when a new one was made now (the code is sent
   * only then); null when the account already has the maximum of pending requests.
   */
  async request(
    channel: string,
    accountId: string,
    senderId: string,
    senderName?: string,
  ): Promise<{ request: PairingRequest; created: boolean } | null> {
    const pending = (await this.pending(channel)).filter((r) => r.accountId === accountId);
    const mine = pending.find((r) => r.senderId === senderId);
    if (mine) return { request: mine, created: false };
    if (pending.length >= MAX_PENDING_PER_ACCOUNT) return null;
    const taken = new Set((await this.pending()).map((r) => r.code));
    let code = generateCode();
    for (let i = 0; i < 10 && taken.has(code); i++) code = generateCode();
    const request: PairingRequest = {
      channel,
      accountId,
      senderId,
      code,
      createdAt: this.now(),
      ...(senderName ? { senderName } : {}),
    };
    await this.kv.set(PAIRING_REQUESTS_NS, code, request);
    return { request, created: true };
  }

  async #find(channel: string | undefined, code: string): Promise<PairingRequest> {
    const c = normalizeCode(code);
    const hit = (await this.pending(channel)).find((r) => r.code === c);
    if (!hit)
      throw new SwitchboardError(
        "NOT_FOUND",
        `no pending pairing request with code ${c}${channel ? ` on ${channel}` : ""} (codes expire after 1 hour; see \`switchboard pairing list\`)`,
        { details: { field: "code" } },
      );
    return hit;
  }

  /** Approves the pending request with `code` (on `channel`, or on any channel when omitted). */
  async approve(channel: string | undefined, code: string): Promise<PairingApproval> {
    const req = await this.#find(channel, code);
    const approval: PairingApproval = {
      channel: req.channel,
      accountId: req.accountId,
      senderId: req.senderId,
      code: req.code,
      createdAt: req.createdAt,
      approvedAt: this.now(),
    };
    await this.kv.set(PAIRING_APPROVED_NS, approvalKey(req.channel, req.accountId, req.senderId), approval);
    await this.kv.delete(PAIRING_REQUESTS_NS, req.code);
    return approval;
  }

  /** Drops the pending request with `code`; the sender may ask again after it (a new code). */
  async deny(channel: string | undefined, code: string): Promise<PairingRequest> {
    const req = await this.#find(channel, code);
    await this.kv.delete(PAIRING_REQUESTS_NS, req.code);
    return req;
  }
}

/** What the stranger reads: who they are to us, the code, and what the owner runs. */
export function pairingReply(req: PairingRequest): string {
  const name = req.channel.charAt(0).toUpperCase() + req.channel.slice(1);
  return [
    "This assistant does not know you yet, so your message was not passed on.",
    `Your ${name} user id: ${req.senderId}`,
    `Pairing code: ${req.code}`,
    `Ask the owner to approve it: switchboard pairing approve ${req.channel} ${req.code} (or /pair ${req.code}). The code expires in 1 hour.`,
  ].join("\n");
}

export function pairingStore(services: Pick<Services, "store" | "now">): PairingStore {
  return new PairingStore(services.store.kv, services.now);
}

/**
 * A reply straight to the chat a message came from, without creating a session (strangers get
 * none): once per inbound message id, through the outbox claim.
 */
export async function replyInChat(ctx: InboundCtx, text: string, purpose: string): Promise<void> {
  const { msg, services } = ctx;
  const adapter = services.channels.get(msg.channel, msg.accountId);
  if (!adapter) return;
  const id = `${purpose}:${msg.channel}:${msg.accountId}:${msg.peerId}:${msg.messageId}`;
  if (!(await services.store.outbox.claim(id, 24 * 3600_000))) return;
  try {
    const res = await adapter.send({
      accountId: msg.accountId,
      to: msg.peerId,
      ...(msg.threadId ? { threadId: msg.threadId } : {}),
      text,
      format: "plain",
    });
    await services.store.outbox.complete(id, res);
  } catch (err) {
    await services.store.outbox.release(id);
    services.logger.warn({ err, channel: msg.channel }, "pairing: reply not delivered");
  }
}
