/**
 * A loopback Telegram Bot API server for driving the real grammY client in tests.
 * Serves `POST /bot<token>/<method>` with the `{ ok, result }` envelope, `getUpdates` long
 * polling with offset semantics, and records every call. Faults are queued per method.
 * It refuses what the Bot API refuses: `sendMessage` / `editMessageText` text over 4,096
 * characters after entity parsing ("message is too long"), empty text, and HTML that does not
 * parse (unknown or unbalanced tags, bare `<` or `&`: "can't parse entities").
 * With `exclusivePolling`, a getUpdates that arrives while another one is held open is answered
 * 409 Conflict, as Telegram answers two processes polling one token.
 */
import type http from "node:http";
import { type LoopbackServer, loopbackServer, type MultipartBody, parseMultipart } from "./http.js";

export interface TelegramCall {
  method: string;
  payload: Record<string, unknown>;
  /** Whether the fake answered `ok: true`. */
  ok?: boolean;
  /** When the fake received it (ms since epoch). */
  at?: number;
}

export interface FakeUser {
  id: number;
  is_bot: boolean;
  first_name: string;
  username?: string;
}

type Fault = { code: number; description: string; retryAfter?: number };

const BOT = {
  id: 7000001,
  is_bot: true,
  first_name: "Switchboard",
  username: "switchboard_test_bot",
  can_join_groups: true,
  can_read_all_group_messages: false,
  supports_inline_queries: false,
  can_connect_to_business: false,
  has_main_web_app: false,
  has_topics_enabled: false,
};

export class FakeTelegram {
  readonly token: string;
  readonly bot = BOT;
  readonly calls: TelegramCall[] = [];
  /** Offsets seen on getUpdates calls, in order (the last one is what a restart would resume from). */
  readonly offsets: number[] = [];
  private loop!: LoopbackServer;
  private updates: Array<Record<string, unknown> & { update_id: number }> = [];
  private nextUpdateId = 1;
  private nextMessageId = 100;
  private readonly texts = new Map<string, string>();
  private nextTopicId = 500;
  private waiters = new Set<() => void>();
  private callWaiters = new Set<() => void>();
  private faults = new Map<string, Fault[]>();
  private holds = new Map<string, Promise<void>>();
  private rejectEntities = 0;
  /** Long polls held open right now. */
  private openPolls = 0;
  /** getUpdates calls answered 409 because another was open. */
  conflicts = 0;
  exclusivePolling = false;
  /** getFile refuses files over this ("file is too big"): the cloud Bot API's 20 MiB by default. */
  fileLimitBytes = 20 * 1024 * 1024;
  /** Files the bot can fetch: getFile by file_id, then GET /file/bot<token>/<file_path>. */
  private readonly files = new Map<string, { path: string; bytes: Buffer; stall?: boolean }>();
  private nextFileId = 1;
  /** GET /file/... requests, with whether they came with the right token. */
  readonly fileRequests: Array<{ path: string; tokenOk: boolean }> = [];
  /** Multipart uploads (sendPhoto, sendVoice, …): the form fields and file parts as received. */
  readonly uploads: Array<{ method: string } & MultipartBody> = [];

  private constructor(token: string) {
    this.token = token;
  }

  static async start(
    token = "123456:TEST-token",
    opts: { exclusivePolling?: boolean; fileLimitBytes?: number } = {},
  ): Promise<FakeTelegram> {
    const fake = new FakeTelegram(token);
    fake.exclusivePolling = opts.exclusivePolling ?? false;
    if (opts.fileLimitBytes !== undefined) fake.fileLimitBytes = opts.fileLimitBytes;
    fake.loop = await loopbackServer((req, res) => void fake.handle(req, res));
    return fake;
  }

  get apiRoot(): string {
    return this.loop.url;
  }

  // ----------------------------------------------------------------------------- test controls

  /** Queue an update (update_id assigned here) and wake pending long polls. Returns the id. */
  pushUpdate(update: Record<string, unknown>): number {
    const update_id = this.nextUpdateId++;
    this.updates.push({ ...update, update_id });
    for (const w of this.waiters) w();
    return update_id;
  }

  /** A message update in a chat, from `from`. */
  pushMessage(
    chat: {
      id: number;
      type: "private" | "group" | "supergroup" | "channel";
      title?: string;
      is_forum?: boolean;
    },
    from: FakeUser | undefined,
    message: Record<string, unknown>,
    kind: "message" | "channel_post" = "message",
  ): number {
    const msg = {
      message_id: this.nextMessageId++,
      date: 1_700_000_000,
      chat,
      ...(from ? { from } : {}),
      ...message,
    };
    return this.pushUpdate({ [kind]: msg });
  }

  /**
   * A press of an inline keyboard button under the bot's message `messageId` in `chat` (a
   * `callback_query` update, as Telegram sends it). Returns the callback query id.
   */
  pushCallback(
    chat: { id: number; type: "private" | "group" | "supergroup" | "channel" },
    from: FakeUser,
    messageId: number,
    data: string,
  ): string {
    const id = `cq${this.nextUpdateId}`;
    this.pushUpdate({
      callback_query: {
        id,
        from,
        chat_instance: `ci${chat.id}`,
        data,
        message: {
          message_id: messageId,
          date: 1_700_000_000,
          chat,
          from: {
            id: this.bot.id,
            is_bot: true,
            first_name: this.bot.first_name,
            username: this.bot.username,
          },
          text: this.texts.get(`${chat.id}:${messageId}`) ?? "",
        },
      },
    });
    return id;
  }

  /**
   * A file the bot may download; returns its file_id. `stall`: the download sends its headers and
   * the first bytes, then nothing more (never ends).
   */
  addFile(bytes: Buffer, filePath = `documents/file_${this.nextFileId}.bin`, stall = false): string {
    const fileId = `FILE${this.nextFileId++}`;
    this.files.set(fileId, { path: filePath, bytes, ...(stall ? { stall } : {}) });
    return fileId;
  }

  /** Resolves once the bot has confirmed `updateId` (a getUpdates with a larger offset). */
  async waitConfirmed(updateId: number): Promise<void> {
    await this.waitFor(() => this.offsets.some((o) => o > updateId));
  }

  /** Resolves with the first recorded call matching, waiting for it if needed. */
  async waitForCall(method: string, pred: (c: TelegramCall) => boolean = () => true): Promise<TelegramCall> {
    let found: TelegramCall | undefined;
    await this.waitFor(() => {
      found = this.calls.find((c) => c.method === method && pred(c));
      return found !== undefined;
    });
    return found as TelegramCall;
  }

  /** The next `sendMessage` with parse_mode HTML answers 400 "can't parse entities". */
  rejectEntitiesOnce(): void {
    this.rejectEntities++;
  }

  /** The next call of `method` fails with this Bot API error. */
  failNext(method: string, code: number, description: string, retryAfter?: number): void {
    const list = this.faults.get(method) ?? [];
    list.push({ code, description, retryAfter });
    this.faults.set(method, list);
  }

  /** The next call of `method` is answered only after `release()`. */
  holdNext(method: string): { release(): void } {
    let release!: () => void;
    this.holds.set(
      method,
      new Promise<void>((r) => {
        release = r;
      }),
    );
    return { release: () => release() };
  }

  /** The current text of a message the bot sent (after its edits). */
  textOf(chatId: string | number, messageId: string | number): string | undefined {
    return this.texts.get(`${chatId}:${messageId}`);
  }

  sentMessages(): Array<{ chat_id: string; text: string; parse_mode?: string; message_thread_id?: number }> {
    return this.calls
      .filter((c) => c.method === "sendMessage" && c.ok === true)
      .map((c) => ({
        chat_id: String(c.payload.chat_id),
        text: String(c.payload.text),
        parse_mode: c.payload.parse_mode as string | undefined,
        message_thread_id: c.payload.message_thread_id as number | undefined,
      }));
  }

  async close(): Promise<void> {
    for (const w of this.waiters) w();
    await this.loop.close();
  }

  // ----------------------------------------------------------------------------- server

  private async waitFor(cond: () => boolean, tries = 500): Promise<void> {
    for (let i = 0; i < tries && !cond(); i++) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, 20);
        function done(): void {
          clearTimeout(t);
          resolve();
        }
        this.callWaiters.add(done);
      });
    }
    if (!cond()) throw new Error("fake telegram: condition not met");
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const file = /^\/file\/bot([^/]+)\/(.+)$/.exec(req.url ?? "");
    if (req.method === "GET" && file) return this.serveFile(res, file[1] as string, file[2] as string);
    const m = /^\/bot([^/]+)\/(\w+)$/.exec(req.url ?? "");
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (!m || m[1] !== this.token) {
      send(m ? 401 : 404, {
        ok: false,
        error_code: m ? 401 : 404,
        description: m ? "Unauthorized" : "Not Found",
      });
      return;
    }
    const method = m[2] as string;
    const body = Buffer.concat(chunks);
    const type = req.headers["content-type"] ?? "";
    let payload: Record<string, unknown>;
    if (type.startsWith("multipart/form-data")) {
      const form = await parseMultipart(type, body);
      this.uploads.push({ method, ...form });
      payload = { ...form.fields };
      // Objects come JSON-encoded as form fields; numbers as text.
      for (const [k, v] of Object.entries(form.fields)) {
        if (k === "caption") continue;
        if (/^-?\d+$/.test(v)) payload[k] = Number(v);
        else if (v.startsWith("{") || v.startsWith("[")) payload[k] = JSON.parse(v);
      }
    } else {
      const raw = body.toString("utf8");
      payload = (raw ? JSON.parse(raw) : {}) as Record<string, unknown>;
    }
    const call: TelegramCall = { method, payload, at: Date.now() };
    this.calls.push(call);
    const reply = (result: unknown): void => {
      call.ok = true;
      send(200, { ok: true, result });
      this.notifyCall();
    };
    const fail = (f: Fault): void => {
      call.ok = false;
      const parameters = f.retryAfter !== undefined ? { retry_after: f.retryAfter } : undefined;
      send(f.code, {
        ok: false,
        error_code: f.code,
        description: f.description,
        ...(parameters ? { parameters } : {}),
      });
      this.notifyCall();
    };

    const hold = this.holds.get(method);
    if (hold) {
      this.holds.delete(method);
      await hold;
    }
    const fault = this.faults.get(method)?.shift();
    if (fault) return fail(fault);

    switch (method) {
      case "getMe":
        return reply(this.bot);
      case "deleteWebhook":
      case "setWebhook":
      case "setMyCommands":
      case "sendChatAction":
      case "answerCallbackQuery":
        return reply(true);
      case "getUpdates":
        return this.getUpdates(payload, res, reply);
      case "sendMessage": {
        const refused = refuseText(payload);
        if (refused) return fail({ code: 400, description: refused });
        if (this.rejectEntities > 0 && payload.parse_mode === "HTML") {
          this.rejectEntities--;
          return fail({
            code: 400,
            description: "Bad Request: can't parse entities: unexpected end tag at byte offset 5",
          });
        }
        const chat = {
          id: Number(payload.chat_id),
          type: Number(payload.chat_id) > 0 ? "private" : "supergroup",
        };
        const messageId = this.nextMessageId++;
        this.texts.set(`${payload.chat_id}:${messageId}`, String(payload.text));
        return reply({
          message_id: messageId,
          date: 1_700_000_000,
          chat,
          from: { id: BOT.id, is_bot: true, first_name: BOT.first_name, username: BOT.username },
          text: payload.text,
          ...(payload.message_thread_id
            ? { message_thread_id: payload.message_thread_id, is_topic_message: true }
            : {}),
        });
      }
      case "editMessageText": {
        const k = `${payload.chat_id}:${payload.message_id}`;
        const before = this.texts.get(k);
        if (before === undefined)
          return fail({ code: 400, description: "Bad Request: message to edit not found" });
        if (before === String(payload.text))
          return fail({
            code: 400,
            description:
              "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
          });
        this.texts.set(k, String(payload.text));
        return reply({
          message_id: Number(payload.message_id),
          date: 1_700_000_000,
          chat: { id: Number(payload.chat_id), type: Number(payload.chat_id) > 0 ? "private" : "supergroup" },
          text: payload.text,
        });
      }
      case "getFile": {
        const f = this.files.get(String(payload.file_id));
        if (!f) return fail({ code: 400, description: "Bad Request: invalid file_id" });
        if (f.bytes.length > this.fileLimitBytes)
          return fail({ code: 400, description: "Bad Request: file is too big" });
        return reply({
          file_id: payload.file_id,
          file_unique_id: `u${payload.file_id}`,
          file_size: f.bytes.length,
          file_path: f.path,
        });
      }
      case "sendPhoto":
      case "sendDocument":
      case "sendVoice":
      case "sendAudio":
      case "sendVideo": {
        const caption = typeof payload.caption === "string" ? payload.caption : "";
        if (caption.length > TELEGRAM_CAPTION_LIMIT)
          return fail({ code: 400, description: "Bad Request: message caption is too long" });
        if (payload.parse_mode === "HTML" && caption && typeof parseTelegramHtml(caption) !== "string")
          return fail({ code: 400, description: "Bad Request: can't parse entities: caption" });
        const messageId = this.nextMessageId++;
        return reply({
          message_id: messageId,
          date: 1_700_000_000,
          chat: { id: Number(payload.chat_id), type: Number(payload.chat_id) > 0 ? "private" : "supergroup" },
          ...(caption ? { caption } : {}),
        });
      }
      case "createForumTopic":
        return reply({ message_thread_id: this.nextTopicId++, name: payload.name, icon_color: 7322096 });
      default:
        return fail({ code: 404, description: "Not Found" });
    }
  }

  private async getUpdates(
    payload: Record<string, unknown>,
    res: http.ServerResponse,
    reply: (result: unknown) => void,
  ): Promise<void> {
    if (this.exclusivePolling && this.openPolls > 0) {
      this.conflicts++;
      res.writeHead(409, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          ok: false,
          error_code: 409,
          description:
            "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
        }),
      );
      this.notifyCall();
      return;
    }
    const offset = typeof payload.offset === "number" ? payload.offset : 0;
    const limit = typeof payload.limit === "number" ? payload.limit : 100;
    const timeoutS = typeof payload.timeout === "number" ? payload.timeout : 0;
    this.offsets.push(offset);
    // Updates below the offset are confirmed and forgotten, as on the real server.
    this.updates = this.updates.filter((u) => u.update_id >= offset);
    this.notifyCall();
    if (this.updates.length === 0 && timeoutS > 0) {
      // 'close' before we answered means the client gave up (bot.stop aborts its poll).
      let aborted = false;
      this.openPolls++;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, timeoutS * 1000);
        const waiters = this.waiters;
        function done(): void {
          clearTimeout(timer);
          waiters.delete(done);
          resolve();
        }
        this.waiters.add(done);
        res.once("close", () => {
          aborted = true;
          done();
        });
      });
      this.openPolls--;
      if (aborted) return;
    }
    reply(this.updates.filter((u) => u.update_id >= offset).slice(0, limit));
  }

  private serveFile(res: http.ServerResponse, token: string, filePath: string): void {
    const tokenOk = token === this.token;
    this.fileRequests.push({ path: filePath, tokenOk });
    this.notifyCall();
    const f = [...this.files.values()].find((x) => x.path === decodeURIComponent(filePath));
    if (!tokenOk || !f) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: false, error_code: 404, description: "Not Found" }));
      return;
    }
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-length": String(f.bytes.length),
    });
    if (f.stall) {
      res.write(f.bytes.subarray(0, Math.min(16, f.bytes.length)));
      return;
    }
    res.end(f.bytes);
  }

  private notifyCall(): void {
    for (const w of [...this.callWaiters]) {
      this.callWaiters.delete(w);
      w();
    }
  }
}

/** The Bot API's caption limit (photos, documents, voice, …). */
export const TELEGRAM_CAPTION_LIMIT = 1024;

/** The Bot API's message text limit, counted after entity parsing. */
export const TELEGRAM_TEXT_LIMIT = 4096;

const HTML_TAGS = new Set([
  "b",
  "strong",
  "i",
  "em",
  "u",
  "ins",
  "s",
  "strike",
  "del",
  "span",
  "tg-spoiler",
  "a",
  "code",
  "pre",
  "blockquote",
  "tg-emoji",
]);

/** What Telegram says about a message text, or null when it would accept it. */
export function refuseText(payload: Record<string, unknown>): string | null {
  const text = typeof payload.text === "string" ? payload.text : "";
  let visible = text;
  if (payload.parse_mode === "HTML") {
    const parsed = parseTelegramHtml(text);
    if (typeof parsed !== "string") return `Bad Request: can't parse entities: ${parsed.error}`;
    visible = parsed;
  }
  if (!visible.trim()) return "Bad Request: message text is empty";
  if (visible.length > TELEGRAM_TEXT_LIMIT) return "Bad Request: message is too long";
  return null;
}

/** The text a reader sees, or the parse error, for Telegram's HTML parse mode. */
export function parseTelegramHtml(html: string): string | { error: string } {
  const open: string[] = [];
  let out = "";
  for (let i = 0; i < html.length; ) {
    const c = html[i];
    if (c === "<") {
      const m = /^<(\/?)([a-zA-Z][a-zA-Z-]*)(\s[^<>]*)?>/.exec(html.slice(i));
      if (!m) return { error: `unsupported start tag at byte offset ${i}` };
      const name = (m[2] ?? "").toLowerCase();
      if (!HTML_TAGS.has(name)) return { error: `unsupported start tag "${name}" at byte offset ${i}` };
      if (m[1]) {
        if (open.pop() !== name) return { error: `unexpected end tag at byte offset ${i}` };
      } else open.push(name);
      i += m[0].length;
    } else if (c === "&") {
      const m = /^&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);/.exec(html.slice(i));
      if (!m) return { error: `unsupported entity at byte offset ${i}` };
      const e = m[1] ?? "";
      out += e.startsWith("#")
        ? String.fromCodePoint(Number(e.startsWith("#x") ? `0x${e.slice(2)}` : e.slice(1)))
        : ({ lt: "<", gt: ">", amp: "&", quot: '"' } as Record<string, string>)[e];
      i += m[0].length;
    } else {
      out += c;
      i++;
    }
  }
  if (open.length) return { error: `can't find end tag corresponding to start tag "${open.at(-1)}"` };
  return out;
}
