import { z } from "zod";
import { pairingStore } from "../../routing/pairing.js";
import type { Services } from "../../services/index.js";
import { method, type RpcDispatcher } from "../rpc.js";

/** `pairing.list`, `pairing.approve`, `pairing.deny` (API.md §7): the owner's side of DM pairing. */

/** Channel names are lower case (SEMANTICS §1); `Telegram` on the CLI means `telegram`. */
const channel = z.string().trim().toLowerCase().min(1).max(64);
const code = z.string().trim().min(1).max(64);

export function registerPairingMethods(rpc: RpcDispatcher, services: Pick<Services, "store" | "now">): void {
  const pairing = () => pairingStore(services);
  rpc.register(
    "pairing.list",
    method(z.strictObject({ channel: channel.optional() }), async (p) => {
      const store = pairing();
      const requests = (await store.pending(p.channel)).map((r) => ({
        channel: r.channel,
        accountId: r.accountId,
        senderId: r.senderId,
        code: r.code,
        createdAt: r.createdAt,
        ...(r.senderName ? { senderName: r.senderName } : {}),
      }));
      const approved = (await store.approved(p.channel)).map((a) => ({
        channel: a.channel,
        accountId: a.accountId,
        senderId: a.senderId,
        code: a.code,
        createdAt: a.createdAt,
        approvedAt: a.approvedAt,
      }));
      return { requests, approved };
    }),
  );
  rpc.register(
    "pairing.approve",
    method(z.strictObject({ channel, code }), async (p) => {
      const a = await pairing().approve(p.channel, p.code);
      return { ok: true, senderId: a.senderId };
    }),
  );
  rpc.register(
    "pairing.deny",
    method(z.strictObject({ channel, code }), async (p) => {
      const r = await pairing().deny(p.channel, p.code);
      return { ok: true, senderId: r.senderId };
    }),
  );
}
