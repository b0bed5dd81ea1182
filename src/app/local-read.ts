import type { LoadedConfig } from "../config/load.js";
import { errorMessage, SwitchboardError } from "../errors.js";
import { registerReadMethods } from "../gateway/methods/index.js";
import { registerPairingMethods } from "../gateway/methods/pairing.js";
import { RpcDispatcher } from "../gateway/rpc.js";
import { createLogger } from "../log.js";
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
    if (!r.ok) throw new SwitchboardError(r.error.code, `${r.error.code}: ${r.error.message}`);
    return r.result as T;
  } finally {
    await local.close();
  }
}
