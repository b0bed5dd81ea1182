import path from "node:path";
import {
  createWebchatChannel,
  type WebchatChannel,
  type WebchatChannelDeps,
} from "../../channels/webchat/index.js";
import type { AuthStateStore, ChannelAdapter, WebhookHeaders } from "../channels/types.js";
import type { LoadedConfig } from "../config/load.js";
import type { Logger } from "../log.js";

/** Channel choice: one adapter per configured account; webhooks to mount on the gateway port. */

export type WebhookMount = {
  path: string;
  handle: (headers: WebhookHeaders, rawBody: string) => Promise<{ status: number; body?: unknown }>;
};

/** Channel SDKs are imported only for configured channels (each costs tens of MB). */
export async function createChannels(
  config: LoadedConfig["config"],
  logger: Logger,
  dirs: { stateDir: string; baseDir: string },
  /** Redis storage: where a channel account keeps its auth state (WhatsApp), so any gateway can take it over. */
  authStates?: (channel: string, accountId: string) => AuthStateStore,
): Promise<{ adapters: ChannelAdapter[]; hooks: WebhookMount[] }> {
  const adapters: ChannelAdapter[] = [];
  const hooks: WebhookMount[] = [];
  for (const [accountId, acc] of Object.entries(config.channels.telegram?.accounts ?? {})) {
    const tg = (await import("../../channels/telegram/index.js")).createTelegramChannel(
      { accountId, ...acc, mediaMaxMb: config.channels.telegram?.mediaMaxMb },
      { logger: logger.child({ channel: "telegram", accountId }) },
    );
    adapters.push(tg);
    if (acc.mode === "webhook") {
      // The adapter checks the secret header before it parses the raw body (400 only once verified).
      hooks.push({
        path: `/hooks/telegram/${accountId}`,
        handle: (headers, raw) => tg.handleWebhook(headers, raw),
      });
    }
  }
  for (const [accountId, acc] of Object.entries(config.channels.slack?.accounts ?? {})) {
    const sl = (await import("../../channels/slack/index.js")).createSlackChannel(
      { accountId, ...acc, mediaMaxMb: config.channels.slack?.mediaMaxMb },
      { logger: logger.child({ channel: "slack", accountId }) },
    );
    adapters.push(sl);
    if (acc.mode === "http")
      hooks.push({ path: `/hooks/slack/${accountId}/events`, handle: (h, raw) => sl.handleEvents(h, raw) });
  }
  for (const [accountId, acc] of Object.entries(config.channels.discord?.accounts ?? {})) {
    adapters.push(
      (await import("../../channels/discord/index.js")).createDiscordChannel(
        { accountId, ...acc, mediaMaxMb: config.channels.discord?.mediaMaxMb },
        { logger: logger.child({ channel: "discord", accountId }) },
      ),
    );
  }
  for (const [accountId, acc] of Object.entries(config.channels.whatsapp?.accounts ?? {})) {
    adapters.push(
      (await import("../../channels/whatsapp/index.js")).createWhatsAppChannel(
        {
          accountId,
          mediaMaxMb: config.channels.whatsapp?.mediaMaxMb,
          ...(acc.authDir ? { authDir: path.resolve(dirs.baseDir, acc.authDir) } : {}),
        },
        {
          logger: logger.child({ channel: "whatsapp", accountId }),
          stateDir: dirs.stateDir,
          ...(authStates ? { authStore: authStates("whatsapp", accountId) } : {}),
        },
      ),
    );
  }
  return { adapters, hooks };
}

/**
 * `switchboard whatsapp logout [account]`: forgets the saved WhatsApp login of each account (or
 * the one named): the auth dir's files, and in redis mode the keys under the store prefix. The
 * next start shows a new QR code. Returns the accounts cleared.
 */
export async function logoutWhatsApp(
  config: LoadedConfig["config"],
  logger: Logger,
  dirs: { stateDir: string; baseDir: string },
  authStates: ((channel: string, accountId: string) => AuthStateStore) | undefined,
  only?: string,
): Promise<string[]> {
  const accounts = Object.entries(config.channels.whatsapp?.accounts ?? {}).filter(
    ([id]) => only === undefined || id === only,
  );
  const { createWhatsAppChannel } = await import("../../channels/whatsapp/index.js");
  for (const [accountId, acc] of accounts) {
    await createWhatsAppChannel(
      { accountId, ...(acc.authDir ? { authDir: path.resolve(dirs.baseDir, acc.authDir) } : {}) },
      {
        logger: logger.child({ channel: "whatsapp", accountId }),
        stateDir: dirs.stateDir,
        ...(authStates ? { authStore: authStates("whatsapp", accountId) } : {}),
      },
    ).logout();
  }
  return accounts.map(([id]) => id);
}

const DEMO_NOTICE =
  "This gateway answers with the scripted demo model: no model is configured. Type help, or set models.default in switchboard.json5 (see README).";

/** The built-in web chat, when enabled; it tells the visitor when the scripted demo model answers. */
export function createWebchat(
  config: LoadedConfig["config"],
  logger: Logger,
  demo: boolean,
  history?: WebchatChannelDeps["history"],
): WebchatChannel | null {
  if (!config.channels.webchat.enabled) return null;
  return createWebchatChannel(
    { ...(demo ? { notice: DEMO_NOTICE } : {}) },
    { logger: logger.child({ channel: "webchat" }), ...(history ? { history } : {}) },
  );
}
