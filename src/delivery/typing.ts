import { channelSettings } from "../config/channels.js";
import type { Services } from "../services/index.js";
import { routeOf } from "../sessions/route.js";
import type { SessionEntry } from "../store/types.js";

/**
 * The typing indicator of one turn: shown when it starts (Telegram `sendChatAction`, Discord
 * typing, WhatsApp `composing`, Slack thread status), refreshed while it runs — the platforms
 * expire it after 5–10 s — and ended when the turn ends, success or failure (`stopTyping` where
 * the platform has one, e.g. WhatsApp `paused`). `run.typing` events mirror it on the bus.
 */

const TYPING_REFRESH_MS = 4000;

/**
 * The session's route (store, or `session`: the row the turn just read), its adapter (channels),
 * the per-channel `typing` switch (config).
 */
export type TypingDeps = Pick<Services, "bus" | "store" | "channels" | "config" | "logger">;

export async function startTyping(
  services: TypingDeps,
  runId: string,
  sessionKey: string,
  deliver: boolean,
  session?: SessionEntry,
): Promise<() => Promise<void>> {
  services.bus.emit("run.typing", { runId, sessionKey, on: true });
  let stopChat: () => Promise<void> = async () => {};
  if (deliver) {
    const entry = session ?? (await services.store.sessions.get(sessionKey).catch(() => null));
    const route = entry ? routeOf(entry) : null;
    const adapter = route ? services.channels.get(route.channel, route.accountId) : undefined;
    const enabled = (route && channelSettings(services.config, route.channel)?.typing) ?? true;
    if (route && adapter?.sendTyping && adapter.capabilities.typing && enabled) {
      const log = services.logger;
      const send = () =>
        adapter.sendTyping?.(route.to, route.threadId).catch((err: unknown) => {
          log.debug({ err, channel: route.channel }, "typing indicator not sent");
        });
      void send();
      const timer = setInterval(send, TYPING_REFRESH_MS);
      timer.unref();
      stopChat = async () => {
        clearInterval(timer);
        await adapter.stopTyping?.(route.to, route.threadId).catch(() => {});
      };
    }
  }
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    await stopChat();
    services.bus.emit("run.typing", { runId, sessionKey, on: false });
  };
}
