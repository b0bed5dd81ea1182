import { makeCacheableSignalKeyStore, makeWASocket, useMultiFileAuthState } from "@whiskeysockets/baileys";
import type { WhatsAppSocket, WhatsAppSocketFactory } from "./types.js";

/**
 * The production socket: Baileys over a multi-file auth state in `authDir`. The WhatsApp Web
 * version bundled with Baileys is used as is; the version fetch helpers need the internet at
 * start-up and are never called. History sync is off (the gateway answers new messages only)
 * and the device does not mark itself online, so the phone keeps getting notifications.
 */
export const baileysSocketFactory: WhatsAppSocketFactory = async ({ authDir, logger }) => {
  const { state, saveCreds } = await useMultiFileAuthState(authDir);
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

/** Optional QR renderers, tried in order; neither is a dependency of this project. */
const QR_MODULES = ["qrcode", "qrcode-terminal"];

/** The QR as terminal art when a renderer package is installed, else undefined. */
export async function renderQr(qr: string): Promise<string | undefined> {
  for (const name of QR_MODULES) {
    let mod: unknown;
    try {
      mod = await import(name);
    } catch {
      continue;
    }
    const api = (mod as { default?: unknown }).default ?? mod;
    const fns = api as {
      toString?: (text: string, opts: object) => Promise<string>;
      generate?: (text: string, opts: object, cb: (out: string) => void) => void;
    };
    try {
      if (name === "qrcode" && typeof fns.toString === "function")
        return await fns.toString(qr, { type: "terminal", small: true });
      if (name === "qrcode-terminal" && typeof fns.generate === "function") {
        const generate = fns.generate;
        return await new Promise<string>((resolve) => generate(qr, { small: true }, resolve));
      }
    } catch {
      // A broken renderer falls through to the next one or to the raw string.
    }
  }
  return undefined;
}

/** What the operator sees: how to link, then the QR (art or raw string). */
export function qrInstructions(accountId: string, qr: string, art: string | undefined): string {
  const how =
    `WhatsApp account "${accountId}" needs to be linked: on the phone open WhatsApp → Settings → ` +
    "Linked devices → Link a device, and scan this QR code (it is replaced every 20-60 s).";
  if (art) return `${how}\n${art}\n`;
  return (
    `${how}\nNo QR renderer is installed (npm install qrcode to draw it here), so paste this string into ` +
    `any QR code generator and scan the result:\n${qr}\n`
  );
}
