import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import {
  type AuthenticationCreds,
  type AuthenticationState,
  BufferJSON,
  initAuthCreds,
  proto,
  type SignalDataTypeMap,
} from "@whiskeysockets/baileys";
import type { AuthStateStore } from "../../src/channels/types.js";
import type { Logger } from "../../src/log.js";

/**
 * Baileys auth state over an `AuthStateStore` (Redis in the many-gateway mode). Keys are the
 * names `useMultiFileAuthState` gives its files, without `.json` (`creds`, `<type>-<id>` with
 * `/` → `__` and `:` → `-`), and values the same BufferJSON text, so a state dir copies over
 * as is. A key batch from Baileys is written in one atomic `set`.
 */
export const CREDS_KEY = "creds";

/** The store key of one signal key (same name as useMultiFileAuthState's file, minus `.json`). */
export function signalKeyName(type: string, id: string): string {
  return `${type}-${id}`.replace(/\//g, "__").replace(/:/g, "-");
}

export function encodeAuthValue(value: unknown): string {
  return JSON.stringify(value, BufferJSON.replacer);
}

export function decodeAuthValue(text: string): unknown {
  return JSON.parse(text, BufferJSON.reviver);
}

export async function useStoreAuthState(
  store: AuthStateStore,
): Promise<{ state: AuthenticationState; saveCreds: () => Promise<void> }> {
  const saved = (await store.get([CREDS_KEY])).get(CREDS_KEY);
  const creds = saved ? (decodeAuthValue(saved) as AuthenticationCreds) : initAuthCreds();
  return {
    state: {
      creds,
      keys: {
        get: async <T extends keyof SignalDataTypeMap>(type: T, ids: string[]) => {
          const found = await store.get(ids.map((id) => signalKeyName(type, id)));
          const out: { [id: string]: SignalDataTypeMap[T] } = {};
          for (const id of ids) {
            const text = found.get(signalKeyName(type, id));
            if (text === undefined) continue;
            let value = decodeAuthValue(text);
            if (type === "app-state-sync-key" && value) {
              value = proto.Message.AppStateSyncKeyData.fromObject(value as Record<string, unknown>);
            }
            out[id] = value as SignalDataTypeMap[T];
          }
          return out;
        },
        set: async (data) => {
          const batch: Record<string, string | null> = {};
          for (const [type, byId] of Object.entries(data)) {
            for (const [id, value] of Object.entries(byId ?? {})) {
              batch[signalKeyName(type, id)] = value ? encodeAuthValue(value) : null;
            }
          }
          await store.set(batch);
        },
      },
    },
    saveCreds: () => store.set({ [CREDS_KEY]: encodeAuthValue(creds) }),
  };
}

/** Bounds the one-time copy (a linked device holds a few thousand key files at most). */
const MAX_MIGRATED_FILES = 100_000;

/**
 * Copies a `useMultiFileAuthState` folder into the store, once: only when the store holds
 * nothing for this account and the folder has `creds.json`. Existing store state is never
 * overwritten. Returns how many entries were copied (0: nothing to do).
 */
export async function migrateAuthDir(dir: string, store: AuthStateStore, log: Logger): Promise<number> {
  if (!(await store.isEmpty())) return 0;
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith(".json"));
  if (!names.includes(`${CREDS_KEY}.json`)) return 0;
  if (names.length > MAX_MIGRATED_FILES) {
    log.error({ authDir: dir, files: names.length }, "whatsapp auth dir too large to migrate; not copied");
    return 0;
  }
  const batch: Record<string, string> = {};
  for (const name of names) {
    const text = await readFile(path.join(dir, name), "utf8");
    decodeAuthValue(text); // refuses a corrupt file before anything is written
    batch[name.slice(0, -".json".length)] = text;
  }
  // Re-checked right before the write: a gateway that migrated meanwhile wins.
  if (!(await store.isEmpty())) return 0;
  await store.set(batch);
  log.warn(
    { authDir: dir, entries: names.length },
    "whatsapp auth state copied from the auth dir into the store (one-time migration); the dir is no longer read",
  );
  return names.length;
}
