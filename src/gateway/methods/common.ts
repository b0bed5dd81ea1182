import { NotFoundError, SwitchboardError } from "../../errors.js";
import type { Services } from "../../services/index.js";
import { operatorCaller, resolveSessionRef } from "../../sessions/service.js";

/** The session an operator names by key, label or sessionId; NOT_FOUND / INVALID_PARAMS otherwise. */
export async function requireSession(services: Pick<Services, "config" | "store">, input: string) {
  const r = await resolveSessionRef(services, input, operatorCaller(services));
  if (!r.ok) {
    if (r.notFound) throw new NotFoundError("session", input);
    throw new SwitchboardError("INVALID_PARAMS", r.error, { details: { field: "sessionKey" } });
  }
  return r.entry;
}
