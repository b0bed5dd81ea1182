import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createWhatsAppChannel, type WhatsAppChannel } from "../../channels/whatsapp/index.js";
import { qrInstructions, renderQr } from "../../channels/whatsapp/socket.js";
import type { InboundMessage } from "../../src/channels/types.js";
import type { SwitchboardError } from "../../src/errors.js";
import { silentLogger } from "../../src/log.js";
import { senderAllowed } from "../../src/routing/gates/access.js";
import { type ChannelHarness, channelContract } from "../contract/channel.js";
import { BOT_LID, BOT_PN, boom, FakeWhatsApp, ManualTimers } from "../fakes/whatsapp.js";
import { eventually, tempDir } from "../helpers.js";

const ADA = "4917012345678";
const GROUP = "120363000000000001@g.us";
/** WhatsApp's rate-overlimit has no retry-after, so the contract's 3 s is the configured wait. */
const RATE_LIMIT_MS = 3000;

async function harness(): Promise<ChannelHarness> {
  const wa = new FakeWhatsApp();
  const { dir, cleanup } = tempDir("sb-wa-");
  const adapter = createWhatsAppChannel(
    { accountId: "default", rateLimitRetryAfterMs: RATE_LIMIT_MS },
    { logger: silentLogger(), stateDir: dir, socketFactory: wa.factory, printQr: () => undefined },
  );
  return {
    adapter,
    injectDirect: async (text) => wa.current.upsert([wa.dm(ADA, text)]),
    injectGroup: async (text, { mention }) =>
      wa.current.upsert([
        mention
          ? wa.group(GROUP, `${ADA}@s.whatsapp.net`, `@${BOT_PN} ${text}`, {
              mentionedJid: [`${BOT_PN}@s.whatsapp.net`],
            })
          : wa.group(GROUP, `${ADA}@s.whatsapp.net`, text),
      ]),
    injectOwn: async (text) =>
      wa.current.upsert([
        { ...wa.dm(ADA, text), key: { remoteJid: `${ADA}@s.whatsapp.net`, fromMe: true, id: wa.nextId() } },
      ]),
    sent: async () =>
      wa.allSent().map((s) => ({
        to: s.jid.endsWith("@s.whatsapp.net") ? `+${s.jid.split("@")[0]}` : s.jid,
        text: s.text,
      })),
    rateLimitNextSend: async (s) => {
      if (s * 1000 !== RATE_LIMIT_MS) throw new Error(`whatsapp harness: configured for ${RATE_LIMIT_MS} ms`);
      wa.current.failNextSend(boom("rate-overlimit", 500, 429));
    },
    cleanup: async () => cleanup(),
  };
}

channelContract("whatsapp", harness);

describe("whatsapp specifics", () => {
  let wa: FakeWhatsApp;
  let timers: ManualTimers;
  let qrs: string[];
  let stateDir: string;
  let removeDir: () => void;
  let adapter: WhatsAppChannel;
  let inbound: InboundMessage[];
  const collect = async (m: InboundMessage): Promise<void> => {
    inbound.push(m);
  };
  const waitText = (needle: string): Promise<InboundMessage> =>
    eventually(() => inbound.find((m) => m.text.includes(needle)), 500);
  const make = (extra: Record<string, unknown> = {}) =>
    createWhatsAppChannel(
      { accountId: "main", reconnectBaseMs: 100, reconnectMaxMs: 300, ...extra },
      {
        logger: silentLogger(),
        stateDir,
        socketFactory: wa.factory,
        timers,
        printQr: (qr) => void qrs.push(qr),
      },
    );

  beforeEach(() => {
    wa = new FakeWhatsApp();
    timers = new ManualTimers();
    qrs = [];
    inbound = [];
    ({ dir: stateDir, cleanup: removeDir } = tempDir("sb-wa-"));
    adapter = make();
  });

  afterEach(async () => {
    await adapter.stop();
    removeDir();
  });

  it("keeps the auth state in <stateDir>/whatsapp/<accountId>, owner-only", async () => {
    await adapter.start(collect);
    const expected = path.join(stateDir, "whatsapp", "main");
    expect(wa.authDirs).toEqual([expected]);
    expect(statSync(expected).mode & 0o777).toBe(0o700);
  });

  it("receives a DM with the E.164 sender and answers it by number", async () => {
    await adapter.start(collect);
    wa.current.upsert([wa.dm(ADA, "hello there")]);
    const msg = await waitText("hello there");
    expect(msg).toMatchObject({
      channel: "whatsapp",
      accountId: "main",
      chatType: "direct",
      peerId: `+${ADA}`,
      senderId: `+${ADA}`,
      senderName: "Ada",
      timestamp: 1_750_000_000_000,
    });
    const res = await adapter.send({ accountId: "main", to: msg.peerId, text: "hi Ada", format: "native" });
    expect(wa.current.sent).toEqual([
      { jid: `${ADA}@s.whatsapp.net`, text: "hi Ada", id: res.messageIds[0] },
    ]);
  });

  it("maps group mentions (phone JID or LID), quotes of the bot, and leaves other group talk unmentioned", async () => {
    await adapter.start(collect);
    const ada = `${ADA}@s.whatsapp.net`;
    wa.current.upsert([
      wa.group(GROUP, ada, "general chatter"),
      wa.group(GROUP, ada, `@${BOT_PN} /status`, { mentionedJid: [`${BOT_PN}@s.whatsapp.net`] }),
      wa.group(GROUP, ada, `@${BOT_LID} via lid`, { mentionedJid: [`${BOT_LID}@lid`] }),
      wa.group(GROUP, ada, "someone else", { mentionedJid: ["4930111111@s.whatsapp.net"] }),
      wa.group(GROUP, ada, "answering your message", {
        stanzaId: "BOTMSG1",
        participant: `${BOT_LID}@lid`,
        quotedMessage: { conversation: "earlier" },
      }),
    ]);
    const chatter = await waitText("general chatter");
    const status = await waitText("/status");
    const viaLid = await waitText("via lid");
    const other = await waitText("someone else");
    const quote = await waitText("answering your message");
    expect(chatter).toMatchObject({
      chatType: "group",
      peerId: GROUP,
      senderId: `+${ADA}`,
      wasMentioned: false,
    });
    // The leading @mention is how the bot is addressed; it is removed so the command parses.
    expect(status).toMatchObject({ wasMentioned: true, text: "/status" });
    expect(viaLid.wasMentioned).toBe(true);
    expect(other.wasMentioned).toBe(false);
    expect(quote).toMatchObject({ replyToBot: true, wasMentioned: false });

    await adapter.send({ accountId: "main", to: status.peerId, text: "status card", format: "native" });
    expect(wa.current.sent.at(-1)?.jid).toBe(GROUP);
  });

  it("normalises LID senders to E.164 so an E.164 allow-list matches them", async () => {
    await adapter.start(collect);
    const lidOnly = "555000111222333";
    wa.current.lidToPn.set(`${lidOnly}@lid`, "4917077777777:0@s.whatsapp.net");
    wa.current.upsert([
      wa.dmFromLid("123456789012345", "lid with alt", "4917099999999"),
      wa.dmFromLid(lidOnly, "lid via mapping store"),
      wa.dmFromLid("777777777777777", "lid unknown"),
      wa.group(GROUP, "888888888888888@lid", "group lid", undefined, {
        participantAlt: "4917088888888@s.whatsapp.net",
      }),
    ]);
    const alt = await waitText("lid with alt");
    const mapped = await waitText("lid via mapping store");
    const unknown = await waitText("lid unknown");
    const group = await waitText("group lid");
    expect(alt).toMatchObject({ senderId: "+4917099999999", peerId: "+4917099999999" });
    expect(mapped.senderId).toBe("+4917077777777");
    expect(unknown.senderId).toBe("777777777777777@lid");
    expect(group).toMatchObject({ senderId: "+4917088888888", peerId: GROUP });

    const allowFrom = ["+4917099999999"];
    expect(senderAllowed(allowFrom, "whatsapp", alt.senderId)).toBe(true);
    expect(senderAllowed(allowFrom, "whatsapp", unknown.senderId)).toBe(false);

    // A DM whose peer is only known by LID is answered on that LID.
    await adapter.send({ accountId: "main", to: unknown.peerId, text: "hello lid", format: "native" });
    expect(wa.current.sent.at(-1)?.jid).toBe("777777777777777@lid");
  });

  it("ignores own messages, status broadcasts, history appends and protocol messages", async () => {
    await adapter.start(collect);
    wa.current.upsert([wa.dm(ADA, "from history")], "append");
    wa.current.upsert([
      { ...wa.dm(ADA, "own"), key: { remoteJid: `${ADA}@s.whatsapp.net`, fromMe: true, id: "X1" } },
      {
        ...wa.dm(ADA, "status post"),
        key: { remoteJid: "status@broadcast", participant: `${ADA}@s.whatsapp.net`, id: "X2" },
      },
      { key: { remoteJid: `${ADA}@s.whatsapp.net`, id: "X3" }, message: { protocolMessage: { type: 0 } } },
      wa.dm(ADA, "marker"),
    ]);
    await waitText("marker");
    expect(inbound.map((m) => m.text)).toEqual(["marker"]);
  });

  it("shows a QR in status until linked, saves credentials, and restarts at once when asked (515)", async () => {
    wa.autoOpen = false;
    const started = adapter.start(collect);
    await eventually(() => wa.sockets.length === 1, 100);
    wa.current.qr("2@QRREF,abc,def");
    await started;
    expect(adapter.status()).toEqual({
      state: "needs-login",
      detail: "2@QRREF,abc,def",
      qr: "2@QRREF,abc,def",
    });
    expect(qrs).toEqual(["2@QRREF,abc,def"]);

    // The phone scanned the code: Baileys saves the new credentials, then WhatsApp restarts the stream.
    wa.current.credsUpdate();
    expect(wa.saveCredsCalls).toBe(1);
    wa.current.close(515, "restart required");
    await eventually(() => wa.sockets.length === 2, 100);
    expect(timers.delays()).toEqual([]);
    wa.current.open();
    expect(adapter.status().state).toBe("connected");
  });

  it("loggedOut (401): clears the auth files, asks to re-link, does not reconnect", async () => {
    await adapter.start(collect);
    const authDir = path.join(stateDir, "whatsapp", "main");
    writeFileSync(path.join(authDir, "creds.json"), "{}");
    writeFileSync(path.join(authDir, "pre-key-1.json"), "{}");
    writeFileSync(path.join(authDir, "README.txt"), "not ours");
    wa.current.close(401, "logged out");
    await eventually(() => adapter.status().state === "needs-login", 100);
    expect(adapter.status().detail).toMatch(/re-link/);
    expect(readdirSync(authDir)).toEqual(["README.txt"]);
    expect(wa.sockets).toHaveLength(1);
    expect(timers.delays()).toEqual([]);
  });

  it("connectionReplaced (440): a conflict, retried with backoff (never the end), back to connected", async () => {
    await adapter.start(collect);
    wa.autoOpen = false;
    wa.current.close(440, "replaced");
    await eventually(() => timers.delays().length === 1, 100);
    expect(adapter.status().state).toBe("reconnecting");
    expect(adapter.status().detail).toMatch(/another whatsapp web session/i);
    const [first] = timers.delays() as [number];
    expect(first).toBeGreaterThanOrEqual(750);
    expect(first).toBeLessThanOrEqual(1000);
    timers.fire(first);
    await eventually(() => wa.sockets.length === 2, 100);
    wa.current.close(440, "replaced again");
    await eventually(() => timers.delays().length === 1, 100);
    const [second] = timers.delays() as [number];
    expect(second).toBeGreaterThanOrEqual(1500); // doubled
    timers.fire(second);
    await eventually(() => wa.sockets.length === 3, 100);
    wa.current.open();
    await eventually(() => adapter.status().state === "connected", 100);
  });

  it("other closes reconnect with doubling, capped back-off that resets once connected", async () => {
    await adapter.start(collect);
    wa.autoOpen = false;
    const delays: number[] = [];
    for (const code of [428, 408, 500, 503]) {
      wa.current.close(code);
      await eventually(() => timers.delays().length === 1, 100);
      expect(adapter.status().state).toBe("reconnecting");
      const [delay] = timers.delays() as [number];
      delays.push(delay);
      timers.fire(delay);
      await eventually(() => wa.sockets.length === delays.length + 1, 100);
    }
    expect(delays).toEqual([100, 200, 300, 300]);

    wa.current.open();
    expect(adapter.status().state).toBe("connected");
    wa.current.close(428);
    await eventually(() => timers.delays().length === 1, 100);
    expect(timers.delays()).toEqual([100]);
  });

  it("typing sends composing, and the next send pauses it", async () => {
    await adapter.start(collect);
    await adapter.sendTyping(`+${ADA}`);
    await adapter.send({ accountId: "main", to: `+${ADA}`, text: "done", format: "native" });
    await adapter.send({ accountId: "main", to: `+${ADA}`, text: "again", format: "native" });
    expect(wa.current.presence).toEqual([
      { type: "composing", jid: `${ADA}@s.whatsapp.net` },
      { type: "paused", jid: `${ADA}@s.whatsapp.net` },
    ]);
  });

  it("refuses sends while not connected or to a malformed target, and maps socket errors", async () => {
    const errorOf = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: unknown) => e as SwitchboardError,
      );
    const send = (to: string) => adapter.send({ accountId: "main", to, text: "x", format: "native" });
    expect((await errorOf(send(`+${ADA}`)))?.code).toBe("UNAVAILABLE");
    await adapter.start(collect);
    expect((await errorOf(send("not a number")))?.code).toBe("INVALID_PARAMS");
    wa.current.failNextSend(boom("Connection Closed", 428));
    expect((await errorOf(send(`+${ADA}`)))?.code).toBe("UNAVAILABLE");
    expect(adapter.capabilities.createThread).toBe(false);
  });

  it("stop ends the socket and detaches from it", async () => {
    await adapter.start(collect);
    const socket = wa.current;
    await adapter.stop();
    expect(socket.ended).toBe(true);
    expect(socket.ev.listenerCount("messages.upsert")).toBe(0);
    expect(adapter.status().state).toBe("stopped");
  });

  it("needs an authDir or a stateDir, and names the field", () => {
    expect(() => createWhatsAppChannel({ accountId: "x" }, { logger: silentLogger() })).toThrow(
      /channels\.whatsapp\.accounts\.x\.authDir/,
    );
    const dir = path.join(stateDir, "explicit");
    mkdirSync(dir);
    expect(createWhatsAppChannel({ accountId: "x", authDir: dir }, { logger: silentLogger() }).authDir).toBe(
      dir,
    );
  });

  it("draws the QR in the terminal and never suggests pasting it into another site", async () => {
    const art = await renderQr("2@RAW,abc,def");
    expect(art?.split("\n").length).toBeGreaterThan(10);
    expect(art).toMatch(/[█▀▄]/);
    const text = qrInstructions("main", "2@RAW", art);
    expect(text).toContain("Linked devices");
    expect(text).toContain(art);
    const fallback = qrInstructions("main", "2@RAW", undefined);
    expect(fallback).not.toContain("2@RAW");
    expect(fallback).not.toMatch(/generator|paste/i);
  });
});
