/**
 * A loopback Slack Web API server (`POST /api/<method>`, form or JSON bodies, `{ok, …}`
 * answers) that records calls, plus a Socket Mode endpoint (`apps.connections.open` → a
 * `ws://` URL on the same port) and helpers to build signed Events API requests.
 */
import { createHmac } from "node:crypto";
import type http from "node:http";
import { WebSocket } from "ws";
import { type LoopbackServer, loopbackServer, parseMultipart } from "./http.js";

export interface SlackCall {
  method: string;
  token: string | undefined;
  args: Record<string, string>;
  ok: boolean;
  /** What the fake answered (without `ok`). */
  result?: Record<string, unknown>;
}

export interface SlackFault {
  /** HTTP status; 429 adds a Retry-After header. Default 200 with `ok: false`. */
  status?: number;
  retryAfter?: number;
  /** Slack `error` string for an `ok: false` answer. */
  error?: string;
}

interface Conversation {
  is_im?: boolean;
  is_mpim?: boolean;
  is_private?: boolean;
  name?: string;
}

export class FakeSlack {
  readonly botToken = "xoxb-fake-bot-token";
  readonly appToken = "xapp-fake-app-token";
  readonly botUserId = "UBOT";
  readonly botId = "BBOT";
  readonly teamId = "T0001";
  readonly calls: SlackCall[] = [];
  /** The current text of each posted message, by `channel:ts` (chat.update replaces it). */
  readonly texts = new Map<string, string>();
  /** chat.update calls in order, with when they arrived. */
  readonly updates: Array<{ channel: string; ts: string; text: string; at: number }> = [];
  readonly users = new Map<string, { name: string; real_name?: string; display_name?: string }>();
  readonly conversations = new Map<string, Conversation>();
  /** Envelope ids the Socket Mode client acknowledged. */
  readonly acked = new Set<string>();
  private loop!: LoopbackServer;
  private sockets: WebSocket[] = [];
  private faults = new Map<string, SlackFault[]>();
  private tsCounter = 0;
  private envelopeCounter = 0;
  private ackWaiters = new Map<string, () => void>();
  /** Files users shared, served at `/files-pri/<id>/<name>` to the bot token only. */
  private readonly files = new Map<
    string,
    { name: string; mimetype: string; bytes: Buffer; stall?: boolean }
  >();
  private fileCounter = 0;
  /** File downloads: the path and the bearer token they came with. */
  readonly fileRequests: Array<{ path: string; token: string | undefined }> = [];
  /** Bytes the bot uploaded (`POST <upload_url>`), by file id, with the name getUploadURLExternal was given. */
  readonly uploaded = new Map<string, { filename: string; bytes: Buffer }>();
  /** `files.completeUploadExternal` calls: the files, channel, comment and thread. */
  readonly completed: Array<{
    files: Array<{ id: string; title?: string }>;
    channel_id?: string;
    initial_comment?: string;
    thread_ts?: string;
  }> = [];

  static async start(): Promise<FakeSlack> {
    const fake = new FakeSlack();
    fake.loop = await loopbackServer((req, res) => void fake.handle(req, res), {
      ws: { path: "/link", onSocket: (ws) => fake.onSocket(ws) },
    });
    return fake;
  }

  private get port(): number {
    return this.loop.port;
  }

  /** What to put in `apiUrl`. */
  get apiUrl(): string {
    return `http://127.0.0.1:${this.port}/api/`;
  }

  /** A fresh message ts, increasing. */
  nextTs(): string {
    this.tsCounter++;
    return `${1_700_000_000 + this.tsCounter}.${String(this.tsCounter).padStart(6, "0")}`;
  }

  /**
   * A file a user shares: returns the file object a `file_share` event carries (absolute loopback
   * URLs). `stall`: the download sends its headers and a few bytes, then nothing.
   */
  addFile(bytes: Buffer, name: string, mimetype: string, stall = false): Record<string, unknown> {
    const id = `F${String(++this.fileCounter).padStart(4, "0")}`;
    this.files.set(id, { name, mimetype, bytes, ...(stall ? { stall } : {}) });
    const url = `http://127.0.0.1:${this.port}/files-pri/${this.teamId}-${id}/${encodeURIComponent(name)}`;
    return {
      id,
      name,
      title: name,
      mimetype,
      filetype: name.split(".").pop(),
      size: bytes.length,
      mode: "hosted",
      is_external: false,
      url_private: url,
      url_private_download: `${url}?download=1`,
    };
  }

  failNext(method: string, fault: SlackFault): void {
    const list = this.faults.get(method) ?? [];
    list.push(fault);
    this.faults.set(method, list);
  }

  posted(): Array<{ channel: string; text: string; thread_ts?: string; mrkdwn?: string; ts: string }> {
    return this.calls
      .filter((c) => c.method === "chat.postMessage" && c.ok)
      .map((c) => ({
        channel: c.args.channel ?? "",
        text: c.args.text ?? "",
        ts: String(c.result?.ts ?? ""),
        ...(c.args.thread_ts ? { thread_ts: c.args.thread_ts } : {}),
        ...(c.args.mrkdwn !== undefined ? { mrkdwn: c.args.mrkdwn } : {}),
      }));
  }

  /** An Events API `event_callback` envelope around `event`. */
  envelope(event: Record<string, unknown>, eventId = `Ev${++this.envelopeCounter}`): Record<string, unknown> {
    return {
      token: "verification-token-unused",
      team_id: this.teamId,
      api_app_id: "A0001",
      type: "event_callback",
      event_id: eventId,
      event_time: 1_700_000_000,
      authorizations: [
        { team_id: this.teamId, user_id: this.botUserId, is_bot: true, is_enterprise_install: false },
      ],
      event: { event_ts: event.ts, team: this.teamId, ...event },
    };
  }

  /** Pushes an events_api envelope over the newest Socket Mode connection; resolves with its envelope id. */
  sendSocketEvent(payload: Record<string, unknown>, retryAttempt = 0): string {
    const ws = this.sockets.at(-1);
    if (!ws) throw new Error("fake slack: no socket mode connection");
    const envelope_id = `env-${++this.envelopeCounter}`;
    ws.send(
      JSON.stringify({
        envelope_id,
        type: "events_api",
        accepts_response_payload: false,
        retry_attempt: retryAttempt,
        retry_reason: retryAttempt ? "timeout" : "",
        payload,
      }),
    );
    return envelope_id;
  }

  /** Resolves once the client acknowledged `envelopeId`. */
  waitAck(envelopeId: string): Promise<void> {
    if (this.acked.has(envelopeId)) return Promise.resolve();
    return new Promise((resolve) => this.ackWaiters.set(envelopeId, resolve));
  }

  /** Number of currently open Socket Mode connections. */
  openSockets(): number {
    return this.sockets.filter((s) => s.readyState === WebSocket.OPEN).length;
  }

  async close(): Promise<void> {
    await this.loop.close();
  }

  // ----------------------------------------------------------------------------- server

  private onSocket(ws: WebSocket): void {
    this.sockets.push(ws);
    ws.on("message", (data) => {
      const msg = JSON.parse(String(data)) as { envelope_id?: string };
      if (!msg.envelope_id) return;
      this.acked.add(msg.envelope_id);
      this.ackWaiters.get(msg.envelope_id)?.();
      this.ackWaiters.delete(msg.envelope_id);
    });
    ws.on("close", () => {
      this.sockets = this.sockets.filter((s) => s !== ws);
    });
    ws.send(
      JSON.stringify({
        type: "hello",
        num_connections: 1,
        connection_info: { app_id: "A0001" },
        debug_info: { host: "fake", approximate_connection_time: 3600 },
      }),
    );
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = req.url ?? "";
    if (url.startsWith("/files-pri/")) return this.serveFile(req, res, url);
    const up = /^\/upload\/(F\w+)$/.exec(url);
    if (up && req.method === "POST") {
      // The SDK posts the bytes as multipart, one part named "body", with the bot token.
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
      const form = await parseMultipart(req.headers["content-type"] ?? "", Buffer.concat(chunks));
      const part = form.files.find((f) => f.field === "body");
      const pending = this.uploaded.get(up[1] as string);
      if (token !== this.botToken || !part || !pending) {
        res.writeHead(400);
        return void res.end("bad upload");
      }
      pending.bytes = part.bytes;
      res.writeHead(200, { "content-type": "text/plain" });
      return void res.end(`OK - ${part.bytes.length}`);
    }
    const raw = Buffer.concat(chunks).toString("utf8");
    const send = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    const m = /^\/api\/([\w.]+)/.exec(req.url ?? "");
    if (!m) return send(404, { ok: false, error: "not_found" });
    const method = m[1] as string;
    const args: Record<string, string> = {};
    if ((req.headers["content-type"] ?? "").includes("application/json")) {
      for (const [k, v] of Object.entries(JSON.parse(raw || "{}") as Record<string, unknown>)) {
        args[k] = typeof v === "string" ? v : JSON.stringify(v);
      }
    } else {
      for (const [k, v] of new URLSearchParams(raw)) args[k] = v;
    }
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? args.token;
    const call: SlackCall = { method, token, args, ok: false };
    this.calls.push(call);
    const ok = (body: Record<string, unknown>): void => {
      call.ok = true;
      call.result = body;
      send(200, { ok: true, ...body });
    };
    const err = (error: string): void => send(200, { ok: false, error });

    const fault = this.faults.get(method)?.shift();
    if (fault) {
      if (fault.status === 429) {
        return send(
          429,
          { ok: false, error: "ratelimited" },
          { "retry-after": String(fault.retryAfter ?? 1) },
        );
      }
      return send(fault.status ?? 200, { ok: false, error: fault.error ?? "fatal_error" });
    }

    if (method === "apps.connections.open") {
      if (token !== this.appToken) return err("invalid_auth");
      return ok({ url: `ws://127.0.0.1:${this.port}/link/?ticket=t${this.sockets.length}` });
    }
    if (token !== this.botToken) return err("invalid_auth");

    switch (method) {
      case "auth.test":
        return ok({
          url: "https://fake.slack.com/",
          team: "Fake Team",
          user: "switchboard",
          team_id: this.teamId,
          user_id: this.botUserId,
          bot_id: this.botId,
          is_enterprise_install: false,
        });
      case "chat.postMessage": {
        if (!args.channel) return err("channel_not_found");
        if (!args.text) return err("no_text");
        // Slack refuses a text past its limit (the adapter must have chunked it).
        if (args.text.length > SLACK_TEXT_LIMIT) return err("msg_too_long");
        const ts = this.nextTs();
        this.texts.set(`${args.channel}:${ts}`, args.text);
        return ok({
          channel: args.channel,
          ts,
          message: {
            type: "message",
            text: args.text,
            user: this.botUserId,
            bot_id: this.botId,
            ts,
            thread_ts: args.thread_ts,
          },
        });
      }
      case "chat.update": {
        const k = `${args.channel}:${args.ts}`;
        if (!this.texts.has(k)) return err("message_not_found");
        this.texts.set(k, args.text ?? "");
        this.updates.push({
          channel: args.channel ?? "",
          ts: args.ts ?? "",
          text: args.text ?? "",
          at: Date.now(),
        });
        return ok({ channel: args.channel, ts: args.ts, text: args.text });
      }
      case "files.info": {
        const f = this.files.get(args.file ?? "");
        if (!f) return err("file_not_found");
        return ok({ file: this.addFileObject(args.file as string) });
      }
      case "files.getUploadURLExternal": {
        const id = `F${String(++this.fileCounter).padStart(4, "0")}`;
        if (!args.filename || !args.length) return err("invalid_arguments");
        this.uploaded.set(id, { filename: args.filename, bytes: Buffer.alloc(0) });
        return ok({ upload_url: `http://127.0.0.1:${this.port}/upload/${id}`, file_id: id });
      }
      case "files.completeUploadExternal": {
        const files = JSON.parse(args.files ?? "[]") as Array<{ id: string; title?: string }>;
        if (!files.every((f) => this.uploaded.get(f.id)?.bytes.length)) return err("file_not_found");
        this.completed.push({
          files,
          ...(args.channel_id ? { channel_id: args.channel_id } : {}),
          ...(args.initial_comment ? { initial_comment: args.initial_comment } : {}),
          ...(args.thread_ts ? { thread_ts: args.thread_ts } : {}),
        });
        return ok({ files: files.map((f) => ({ id: f.id, title: f.title ?? "" })) });
      }
      case "assistant.threads.setStatus":
        return ok({});
      case "chat.postEphemeral":
        if (!args.channel || !args.user || !args.text) return err("invalid_arguments");
        return ok({ message_ts: this.nextTs() });
      case "conversations.info": {
        const c = this.conversations.get(args.channel ?? "");
        if (!c) return err("channel_not_found");
        return ok({ channel: { id: args.channel, ...c } });
      }
      case "users.info": {
        const u = this.users.get(args.user ?? "");
        if (!u) return err("user_not_found");
        return ok({
          user: {
            id: args.user,
            name: u.name,
            real_name: u.real_name,
            profile: { display_name: u.display_name ?? "" },
          },
        });
      }
      default:
        return err("unknown_method");
    }
  }

  private addFileObject(id: string): Record<string, unknown> {
    const f = this.files.get(id);
    if (!f) return {};
    const url = `http://127.0.0.1:${this.port}/files-pri/${this.teamId}-${id}/${encodeURIComponent(f.name)}`;
    return {
      id,
      name: f.name,
      mimetype: f.mimetype,
      size: f.bytes.length,
      url_private: url,
      url_private_download: `${url}?download=1`,
    };
  }

  /** The bot token gets the bytes; anything else gets Slack's answer to a bad token: a redirect to a sign-in page. */
  private serveFile(req: http.IncomingMessage, res: http.ServerResponse, url: string): void {
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    this.fileRequests.push({ path: url, token });
    const m = /^\/files-pri\/[^-/]+-(F\w+)\//.exec(url);
    const f = m ? this.files.get(m[1] as string) : undefined;
    if (token !== this.botToken) {
      res.writeHead(302, { location: `http://127.0.0.1:${this.port}/signin`, "content-type": "text/html" });
      return void res.end("<html>sign in</html>");
    }
    if (!f) {
      res.writeHead(404, { "content-type": "text/html" });
      return void res.end("<html>not found</html>");
    }
    res.writeHead(200, { "content-type": f.mimetype, "content-length": String(f.bytes.length) });
    if (f.stall) return void res.write(f.bytes.subarray(0, 8));
    res.end(f.bytes);
  }
}

/** Headers for a correctly signed Events API request (v0 scheme), at `timestampS` (default now). */
export function signSlackRequest(
  signingSecret: string,
  rawBody: string,
  timestampS = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const sig = createHmac("sha256", signingSecret).update(`v0:${timestampS}:${rawBody}`).digest("hex");
  return {
    "content-type": "application/json",
    "x-slack-request-timestamp": String(timestampS),
    "x-slack-signature": `v0=${sig}`,
  };
}

/**
 * A `block_actions` interactive payload: `user` pressed the button `actionId` under the bot's
 * message `ts` in `channel` (as Slack POSTs it to the Interactivity Request URL).
 */
export function blockActionsPayload(
  channel: string,
  user: string,
  ts: string,
  actionId: string,
  opts: { threadTs?: string; value?: string } = {},
): Record<string, unknown> {
  return {
    type: "block_actions",
    team: { id: "T0001", domain: "fake" },
    api_app_id: "A0001",
    token: "verification-token-unused",
    trigger_id: `trig.${ts}`,
    user: { id: user, username: user.toLowerCase(), team_id: "T0001" },
    channel: { id: channel, name: channel.startsWith("D") ? "directmessage" : "general" },
    container: { type: "message", message_ts: ts, channel_id: channel, is_ephemeral: false },
    message: { type: "message", ts, text: "", ...(opts.threadTs ? { thread_ts: opts.threadTs } : {}) },
    response_url: "http://127.0.0.1:9/response_url/unused",
    actions: [
      {
        type: "button",
        action_id: actionId,
        block_id: "sb_actions",
        value: opts.value ?? actionId,
        action_ts: String(Date.now() / 1000),
      },
    ],
  };
}

/** A signed form-encoded interactive request (`payload=<json>`), at `timestampS` (default now). */
export function signedInteractive(
  signingSecret: string,
  payload: Record<string, unknown>,
  timestampS?: number,
): { headers: Record<string, string>; body: string } {
  const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
  const headers = signSlackRequest(signingSecret, body, timestampS);
  headers["content-type"] = "application/x-www-form-urlencoded";
  return { headers, body };
}

/** Posts a signed Events API body to an adapter's `handleEvents`, as the gateway route would. */
export async function postSignedEvent(
  adapter: {
    handleEvents(
      headers: Record<string, string>,
      rawBody: string,
    ): Promise<{ status: number; body?: unknown }>;
  },
  signingSecret: string,
  body: Record<string, unknown>,
  opts: { timestampS?: number; retryNum?: number } = {},
): Promise<{ status: number; body?: unknown }> {
  const raw = JSON.stringify(body);
  const headers = signSlackRequest(signingSecret, raw, opts.timestampS);
  if (opts.retryNum) {
    headers["x-slack-retry-num"] = String(opts.retryNum);
    headers["x-slack-retry-reason"] = "http_timeout";
  }
  return adapter.handleEvents(headers, raw);
}

/** `chat.postMessage` answers `msg_too_long` past this many characters of `text`. */
export const SLACK_TEXT_LIMIT = 40_000;
