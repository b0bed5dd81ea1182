import { z } from "zod";
import { NotFoundError } from "../../errors.js";
import type { Services } from "../../services.js";
import { resetSession } from "../../sessions/reset.js";
import { toRow } from "../../sessions/rows.js";
import { operatorCaller, resolveSessionRef } from "../../sessions/service.js";
import { method, type RpcDispatcher } from "../rpc.js";

/**
 * `sessions.reset { sessionKey }` → `{ entry: Row, previousSessionId }` (API.md §7): a new
 * sessionId for the same key, as `/new` does in a chat; the old transcript stays readable by its
 * sessionId. A sessionId resolves to its session as everywhere; an unknown session is NOT_FOUND.
 */
export function registerSessionResetMethods(
  rpc: RpcDispatcher,
  services: Pick<Services, "config" | "store" | "bus" | "now" | "logger">,
): void {
  rpc.register(
    "sessions.reset",
    method(z.strictObject({ sessionKey: z.string().min(1) }), async (p) => {
      const r = await resolveSessionRef(services, p.sessionKey, operatorCaller(services));
      if (!r.ok || r.entry.archivedAt !== undefined) throw new NotFoundError("session", p.sessionKey);
      const done = await resetSession(services, r.entry.key, "rpc");
      if (!done) throw new NotFoundError("session", p.sessionKey);
      return {
        entry: toRow(done.entry, services.store.transcripts),
        previousSessionId: done.previousSessionId,
      };
    }),
  );
}
