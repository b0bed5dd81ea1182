import type { LoadedConfig } from "../config/load.js";
import { errorMessage, SwitchboardError } from "../errors.js";
import { registerReadMethods } from "../gateway/methods/index.js";
import { registerPairingMethods } from "../gateway/methods/pairing.js";
import { RpcDispatcher } from "../gateway/rpc.js";
import { buildHistoryView } from "../history/view.js";
import { createLogger } from "../log.js";
import { normalizeKeyInput } from "../sessions/keys.js";
import { mainSessionAgent, operatorCaller } from "../sessions/service.js";
import { openStore } from "./drivers.js";

/**
 * The CLI's fallback when no gateway answers (API.md §2): the read-only RPC methods served from
 * the local store. Safe: the fs store's lock refuses while a gateway owns the state dir.
 */
export async function readLocal<T>(
  loaded: LoadedConfig,
  method: string,
  params: Record<string, unknown>,
  opts: { unreachable: string; onLocal: () => void },
): Promise<T> {
  const logger = createLogger({ level: "silent" });
  const local = await openStore(loaded, logger).catch((e: unknown) => {
    throw new SwitchboardError(
      "UNAVAILABLE",
      `${opts.unreachable}; reading the local store failed too: ${errorMessage(e)}`,
    );
  });
  try {
    opts.onLocal();
    const rpc = new RpcDispatcher(logger);
    registerReadMethods(rpc, { config: loaded.config, store: local.store });
    registerPairingMethods(rpc, { store: local.store, now: Date.now });
    const r = await rpc.dispatch({ id: 1, method, params });
    if (!r.ok) {
      const empty = r.error.code === "NOT_FOUND" ? unwrittenMain(loaded, method, params) : null;
      if (empty) return empty as T;
      throw new SwitchboardError(r.error.code, `${r.error.code}: ${r.error.message}`);
    }
    return r.result as T;
  } finally {
    await local.close();
  }
}

/**
 * An agent's main session always exists (SEMANTICS §1): the gateway creates it on first use and
 * answers its history as empty. Read-only here, so the history of a configured agent's main
 * session that nobody wrote yet is that same empty view, without creating anything.
 */
function unwrittenMain(
  loaded: LoadedConfig,
  method: string,
  params: Record<string, unknown>,
): Record<string, unknown> | null {
  if (method !== "sessions.history" || typeof params.sessionKey !== "string") return null;
  const { config } = loaded;
  const n = normalizeKeyInput(params.sessionKey, operatorCaller({ config }), {
    scope: config.session.scope,
  });
  if (n.kind !== "key" || mainSessionAgent(config, n.key) === null) return null;
  const includeTools = params.includeTools === true;
  return { sessionKey: n.key, ...buildHistoryView([], { includeTools }) };
}
