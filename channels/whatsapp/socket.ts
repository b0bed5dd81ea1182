import { makeCacheableSignalKeyStore, makeWASocket, useMultiFileAuthState } from "@whiskeysockets/baileys";
import { useStoreAuthState } from "./auth.js";
import type { WhatsAppSocket, WhatsAppSocketFactory } from "./types.js";

/**
 * The production socket: Baileys over the auth state in `authStore` (redis storage) or the
 * multi-file one in `authDir`. The WhatsApp Web
 * version bundled with Baileys is used as is; the version fetch helpers need the internet at
 * start-up and are never called. History sync is off (the gateway answers new messages only)
 * and the device does not mark itself online, so the phone keeps getting notifications.
 */
export const baileysSocketFactory: WhatsAppSocketFactory = async ({ authDir, logger, authStore }) => {
  const { state, saveCreds } = authStore
    ? await useStoreAuthState(authStore)
    : await useMultiFileAuthState(authDir);
  // Baileys logs every frame at debug; at most its warnings are worth keeping.
  const quieter = (logger.levels.values[logger.level] ?? 0) >= (logger.levels.values.warn ?? 40);
  const baileysLogger = logger.child({ module: "baileys" }, { level: quieter ? logger.level : "warn" });
  const socket = makeWASocket({
    auth: { creds: state.creds, keys: makeCacheableSignalKeyStore(state.keys, baileysLogger) },
    logger: baileysLogger,
    markOnlineOnConnect: false,
    syncFullHistory: false,
  });
  const narrowed: WhatsAppSocket = socket;
  return { socket: narrowed, saveCreds };
};

/** The QR drawn with Unicode half blocks (uqr), for a terminal; undefined if it cannot be drawn. */
export async function renderQr(qr: string): Promise<string | undefined> {
  try {
    const { renderUnicodeCompact } = await import("uqr");
    return renderUnicodeCompact(qr, { border: 2 });
  } catch {
    return undefined;
  }
}

/**
 * What the operator sees: how to link, then the QR drawn in the terminal. The QR string is a
 * device-link secret: it is never suggested to paste it into another site or tool.
 */
export function qrInstructions(accountId: string, _qr: string, art: string | undefined): string {
  const how =
    `WhatsApp account "${accountId}" needs to be linked: on the phone open WhatsApp → Settings → ` +
    "Linked devices → Link a device, and scan this QR code (it is replaced every 20-60 s).";
  if (art) return `${how}\n${art}\n`;
  return (
    `${how}\nThe QR code could not be drawn here; open the dashboard (/dashboard) or run ` +
    "`switchboard health` in a terminal to see it. Keep the code private: it links a device to this number.\n"
  );
}
