/** The web e2e tests' clients: headless Chromium, and a visitor on the web chat's WebSocket. */
import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";
import WebSocket from "ws";

export const CHROMIUM = "/usr/bin/chromium";

/** Whether the Chromium tests run: the browser is installed, or this is CI (where it must be). */
export const HAS_CHROMIUM = existsSync(CHROMIUM) || process.env.CI === "true";

/** Headless Chromium without a sandbox, GPU, background networking, updates or first-run pages. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  });
}

/** `visitor` on `<base>/webchat/ws` with `token`: the socket, the frames it got (parsed), its opening. */
export function openWebchat(base: string, token: string | null, visitor: string) {
  const ws = new WebSocket(`${base.replace("http", "ws")}/webchat/ws?v=${visitor}&token=${token}`);
  const frames: Array<Record<string, any>> = [];
  ws.on("message", (d) => frames.push(JSON.parse(d.toString())));
  return { ws, frames, ready: new Promise((r) => ws.once("open", r)) };
}
