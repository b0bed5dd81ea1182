import { z } from "zod";
import { NotFoundError } from "../../errors.js";
import type { Services } from "../../services/index.js";
import { resetSession } from "../../sessions/reset.js";
import { toRow } from "../../sessions/rows.js";
import { method, type RpcDispatcher } from "../rpc.js";
import { requireSession } from "./common.js";

/**
 * `sessions.reset { sessionKey }` → `{ entry: Row, previousSessionId }` (API.md §7): a new
 * sessionId for the same key, as `/new` does in a chat; the old transcript stays readable by its
 * sessionId. A sessionId resolves to its session as everywhere; an unknown session is NOT_FOUND, a
 * malformed key INVALID_PARAMS (as every `sessions.*` method).
 */
export function registerSessionResetMethods(
  rpc: RpcDispatcher,
  services: Pick<Services, "config" | "store" | "bus" | "now" | "logger">,
): void {
  rpc.register(
    "sessions.reset",
    method(z.strictObject({ sessionKey: z.string().min(1) }), async (p) => {
      // a malformed key is INVALID_PARAMS, an unknown or archived session NOT_FOUND
      const entry = await requireSession(services, p.sessionKey);
      if (entry.archivedAt !== undefined) throw new NotFoundError("session", p.sessionKey);
      const done = await resetSession(services, entry.key, "rpc");
      if (!done) throw new NotFoundError("session", p.sessionKey);
      return {
        entry: toRow(done.entry, services.store.transcripts),
        previousSessionId: done.previousSessionId,
      };
    }),
  );
}
