import type { InboundMessage } from "../channels/types.js";
import { channelSettings } from "../config/channels.js";
import type { Config } from "../config/schema.js";
import { errorMessage } from "../errors.js";
import type { Services } from "../services/index.js";
import { idPart } from "../sessions/keys.js";
import { THREAD_BINDINGS_NS } from "../store/kv-namespaces.js";
import type { DeliveryContext, SessionEntry } from "../store/types.js";

/**
 * Thread bindings: a chat thread owned by a thread-bound sub-agent (`sessions_spawn` with
 * `thread: true`), so that messages in it route to that child session. Everything about them lives
 * here: their settings, opening the thread, the stored binding and its key, and the router's
 * lookup, which also ends a binding that is off, idle or too old.
 */

/** The session row's record of its bound thread. */
export type ThreadBinding = NonNullable<SessionEntry["threadBinding"]>;

/** A channel account that can open threads. */
export type ThreadAdapter = {
  accountId: string;
  createThread: (to: string, title: string) => Promise<{ threadId: string }>;
};

/** Where a new bound thread is opened: the account that opens it and the chat it is opened in. */
export interface ThreadSite {
  adapter: ThreadAdapter;
  route: DeliveryContext;
}

/** What the store keeps per bound thread, under {@link threadBindingKey}. */
type Bound = { sessionKey: string; boundAt: number };

/**
 * The key a bound thread is stored and looked up by. It names the
 * chat (`to`, the inbound `peerId`) as well as the thread: a thread id is unique only within its
 * chat (Telegram topic ids count per forum), so a binding must never capture another chat's thread.
 */
export function threadBindingKey(channel: string, accountId: string, to: string, threadId: string): string {
  return `${channel}:${accountId}:${idPart(to)}:${threadId}`;
}

/** The key bindings had before they named the chat; still read, for bindings made before. */
function legacyThreadBindingKey(channel: string, accountId: string, threadId: string): string {
  return `${channel}:${accountId}:${threadId}`;
}

/**
 * Effective thread-binding settings: `channels.<name>.threadBindings` over `session.threadBindings`
 * (unset fields inherit); `enabledBy` is the setting that decided `enabled`.
 */
export function bindingSettings(
  config: Pick<Config, "channels" | "session">,
  channel: string,
): { enabled: boolean; idleHours: number; maxAgeHours: number; enabledBy: string } {
  const perChannel = channelSettings(config, channel)?.threadBindings;
  const enabledBy =
    perChannel?.enabled !== undefined
      ? `channels.${channel}.threadBindings.enabled`
      : "session.threadBindings.enabled";
  return { ...config.session.threadBindings, ...(perChannel ?? {}), enabledBy };
}

/** `session.threadBindings.defaultSpawnContext`, overridden per channel (SEMANTICS §3 `context`). */
export function defaultSpawnContext(config: Config, thread: boolean, channel?: string): "isolated" | "fork" {
  if (!thread) return "isolated";
  const perChannel = channel
    ? channelSettings(config, channel)?.threadBindings?.defaultSpawnContext
    : undefined;
  return perChannel ?? config.session.threadBindings.defaultSpawnContext;
}

/** Creates the chat thread a binding names (`sessions_spawn` with `thread: true`); why not when the channel refuses. */
export async function createThreadBinding(
  thread: ThreadSite,
  title: string,
  now: number,
): Promise<{ ok: true; binding: ThreadBinding } | { ok: false; error: string }> {
  const { adapter, route } = thread;
  try {
    const { threadId } = await adapter.createThread(route.to, title.slice(0, 80));
    return {
      ok: true,
      binding: {
        channel: route.channel,
        to: route.to,
        threadId,
        boundAt: now,
        accountId: route.accountId ?? adapter.accountId,
      },
    };
  } catch (err) {
    return {
      ok: false,
      error: `could not create a thread in ${route.channel}: ${errorMessage(err)}`,
    };
  }
}

/** Routes the bound thread under `key` to `sessionKey` from now on. */
export async function bindThread(
  store: Pick<Services["store"], "kv">,
  key: string,
  sessionKey: string,
  boundAt: number,
): Promise<void> {
  await store.kv.set(THREAD_BINDINGS_NS, key, { sessionKey, boundAt } satisfies Bound);
}

/** Releases the thread under `key` (a spawn that failed after binding it). */
export async function unbindThread(store: Pick<Services["store"], "kv">, key: string): Promise<void> {
  await store.kv.delete(THREAD_BINDINGS_NS, key);
}

/** The child session bound to this thread/topic, unless the binding is off, idle or too old. */
export async function boundSession(
  services: Pick<Services, "config" | "store" | "now">,
  msg: InboundMessage,
): Promise<SessionEntry | null> {
  const threadId = msg.threadId ?? msg.topicId;
  if (!threadId) return null;
  let key = threadBindingKey(msg.channel, msg.accountId, msg.peerId, threadId);
  let bound = await services.store.kv.get<Bound>(THREAD_BINDINGS_NS, key);
  const legacy = !bound;
  if (legacy) {
    key = legacyThreadBindingKey(msg.channel, msg.accountId, threadId);
    bound = await services.store.kv.get<Bound>(THREAD_BINDINGS_NS, key);
  }
  if (!bound) return null;
  const entry = await services.store.sessions.get(bound.sessionKey);
  // A binding made before keys named the chat counts only in the chat its thread was created in.
  const to = entry?.threadBinding?.to;
  if (legacy && to !== undefined && idPart(to) !== idPart(msg.peerId)) return null;
  const settings = bindingSettings(services.config, msg.channel);
  const now = services.now();
  const hour = 3600_000;
  const expired =
    !settings.enabled ||
    !entry ||
    entry.archivedAt !== undefined ||
    (settings.maxAgeHours > 0 && now - bound.boundAt > settings.maxAgeHours * hour) ||
    (settings.idleHours > 0 && now - entry.updatedAt > settings.idleHours * hour);
  if (expired) {
    // An ended binding releases the thread: later messages there get an ordinary thread session.
    await services.store.kv.delete(THREAD_BINDINGS_NS, key);
    return null;
  }
  return entry;
}
