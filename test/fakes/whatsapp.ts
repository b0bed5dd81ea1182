/**
 * A fake Baileys socket for the WhatsApp adapter's socket boundary (a wire fake cannot pass
 * Baileys' Noise certificate check). `FakeWhatsApp.factory` is the adapter's `socketFactory`;
 * each call creates a FakeWhatsAppSocket, by default announcing `connection: "open"` on the
 * next tick like a socket with saved credentials. Message builders produce WAMessage shapes
 * as Baileys 7 emits them (LID addressing with `remoteJidAlt` / `participantAlt`).
 */
import type { WhatsAppSocketFactory, WhatsAppTimers } from "../../channels/whatsapp/index.js";

type Listener = (arg: any) => void;

export class FakeEventEmitter {
  private readonly listeners = new Map<string, Set<Listener>>();

  on(event: string, fn: Listener): void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(fn);
  }

  off(event: string, fn: Listener): void {
    this.listeners.get(event)?.delete(fn);
  }

  emit(event: string, arg: unknown): void {
    for (const fn of [...(this.listeners.get(event) ?? [])]) fn(arg);
  }

  listenerCount(event: string): number {
    return this.listeners.get(event)?.size ?? 0;
  }
}

/** A Boom-shaped error as Baileys throws them (`output.statusCode`, server code in `data`). */
export function boom(message: string, statusCode: number, data?: unknown): Error {
  return Object.assign(new Error(message), {
    isBoom: true,
    output: { statusCode, payload: { statusCode, error: "fake", message } },
    data,
  });
}

export const BOT_PN = "4915550000001";
export const BOT_LID = "99887766554433";

export class FakeWhatsAppSocket {
  readonly ev = new FakeEventEmitter();
  user: { id: string; lid?: string; name?: string } | undefined = {
    id: `${BOT_PN}:7@s.whatsapp.net`,
    lid: `${BOT_LID}:7@lid`,
    name: "Switchboard",
  };
  readonly sent: Array<{ jid: string; text: string; id: string }> = [];
  readonly presence: Array<{ type: string; jid: string }> = [];
  /** LID JID → phone JID, served through signalRepository.lidMapping. */
  readonly lidToPn = new Map<string, string>();
  readonly signalRepository = {
    lidMapping: { getPNForLID: async (lid: string) => this.lidToPn.get(lid) ?? null },
  };
  ended = false;
  private failures: Error[] = [];
  private counter = 0;

  /** Everything sendMessage received, media included (outbound WhatsApp media cannot be faked on the wire). */
  readonly contents: Array<{ jid: string; content: Record<string, unknown> }> = [];
  /** updateMediaMessage calls (re-upload requests for expired media) and what they answer. */
  readonly reuploads: unknown[] = [];
  reuploadAnswer: ((msg: any) => any) | undefined;

  async updateMediaMessage(msg: any): Promise<any> {
    this.reuploads.push(msg);
    if (!this.reuploadAnswer) throw new Error("fake whatsapp: no re-upload answer set");
    return this.reuploadAnswer(msg);
  }

  async sendMessage(jid: string, content: Record<string, unknown>): Promise<{ key: { id: string } }> {
    const failure = this.failures.shift();
    if (failure) throw failure;
    const id = `3EB0${String(++this.counter).padStart(8, "0")}`;
    this.contents.push({ jid, content });
    if (typeof content.text === "string") this.sent.push({ jid, text: content.text, id });
    return { key: { id } };
  }

  async sendPresenceUpdate(type: string, jid: string): Promise<void> {
    this.presence.push({ type, jid });
  }

  end(error: Error | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.ev.emit("connection.update", {
      connection: "close",
      lastDisconnect: { error: error ?? boom("Connection Closed", 428), date: new Date() },
    });
  }

  /** The next sendMessage throws `err`. */
  failNextSend(err: Error): void {
    this.failures.push(err);
  }

  open(): void {
    this.ev.emit("connection.update", { connection: "open" });
  }

  qr(code: string): void {
    this.ev.emit("connection.update", { qr: code });
  }

  /** The server closed the connection with a Baileys DisconnectReason. */
  close(statusCode: number, message = "closed"): void {
    this.ended = true;
    this.ev.emit("connection.update", {
      connection: "close",
      lastDisconnect: { error: boom(message, statusCode), date: new Date() },
    });
  }

  upsert(messages: unknown[], type: "notify" | "append" = "notify"): void {
    this.ev.emit("messages.upsert", { messages, type });
  }

  credsUpdate(): void {
    this.ev.emit("creds.update", { me: this.user });
  }
}

export class FakeWhatsApp {
  readonly sockets: FakeWhatsAppSocket[] = [];
  readonly authDirs: string[] = [];
  saveCredsCalls = 0;
  /** Emit `open` on the next tick after creation (a socket with saved credentials). */
  autoOpen = true;
  private ids = 0;

  readonly factory: WhatsAppSocketFactory = async ({ authDir }) => {
    const socket = new FakeWhatsAppSocket();
    this.sockets.push(socket);
    this.authDirs.push(authDir);
    if (this.autoOpen) setImmediate(() => socket.open());
    return {
      socket,
      saveCreds: async () => {
        this.saveCredsCalls++;
      },
    };
  };

  get current(): FakeWhatsAppSocket {
    const s = this.sockets.at(-1);
    if (!s) throw new Error("fake whatsapp: no socket created yet");
    return s;
  }

  /** Every message any socket sent, oldest first. */
  allSent(): Array<{ jid: string; text: string; id: string }> {
    return this.sockets.flatMap((s) => s.sent);
  }

  nextId(): string {
    return `ABCD${String(++this.ids).padStart(8, "0")}`;
  }

  /** A DM from a phone-number JID (`<digits>@s.whatsapp.net`). */
  dm(fromPn: string, text: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      key: { remoteJid: `${fromPn}@s.whatsapp.net`, fromMe: false, id: this.nextId(), ...extra },
      message: { conversation: text },
      messageTimestamp: 1_750_000_000,
      pushName: "Ada",
    };
  }

  /** A DM addressed by LID; `pnAlt` is the phone JID Baileys 7 puts in `remoteJidAlt` when known. */
  dmFromLid(lid: string, text: string, pnAlt?: string): Record<string, unknown> {
    return {
      key: {
        remoteJid: `${lid}@lid`,
        fromMe: false,
        id: this.nextId(),
        addressingMode: "lid",
        ...(pnAlt ? { remoteJidAlt: `${pnAlt}@s.whatsapp.net` } : {}),
      },
      message: { conversation: text },
      messageTimestamp: 1_750_000_001,
      pushName: "Lid User",
    };
  }

  /** A group message; `contextInfo` carries mentions and quotes. */
  group(
    groupJid: string,
    participant: string,
    text: string,
    contextInfo?: Record<string, unknown>,
    keyExtra: Record<string, unknown> = {},
  ): Record<string, unknown> {
    return {
      key: { remoteJid: groupJid, fromMe: false, id: this.nextId(), participant, ...keyExtra },
      message: contextInfo ? { extendedTextMessage: { text, contextInfo } } : { conversation: text },
      messageTimestamp: 1_750_000_002,
      pushName: "Ada",
    };
  }
}

/** Manual timers: nothing fires until the test says so. */
export class ManualTimers implements WhatsAppTimers {
  private next = 1;
  readonly pending = new Map<number, { fn: () => void; ms: number }>();

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.pending.set(id, { fn, ms });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }

  /** Delays of the timers waiting now, in creation order. */
  delays(): number[] {
    return [...this.pending.values()].map((t) => t.ms);
  }

  /** Fires every pending timer with exactly this delay. */
  fire(ms: number): void {
    for (const [id, t] of [...this.pending]) {
      if (t.ms !== ms) continue;
      this.pending.delete(id);
      t.fn();
    }
  }
}
