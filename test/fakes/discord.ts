/**
 * A loopback Discord: REST v10 (`/api/v10/...`) and a JSON gateway on the same port that a real
 * discord.js Client logs into (`rest.api` = `apiUrl`). One guild with one text channel; DMs,
 * threads, typing and sends are recorded. Gateway frames are text JSON (no zlib), heartbeats
 * are ACKed, and RESUME is answered with RESUMED, optionally held back by the test.
 */
import type http from "node:http";
import type { WebSocket } from "ws";
import { type LoopbackServer, loopbackServer, type MultipartBody, parseMultipart } from "./http.js";

export interface FakeDiscordUser {
  id: string;
  username: string;
  global_name?: string | null;
  bot?: boolean;
}

interface FakeChannel {
  id: string;
  type: number;
  name?: string;
  guild_id?: string;
  parent_id?: string;
  owner_id?: string;
  recipients?: FakeDiscordUser[];
}

export interface RestCall {
  method: string;
  path: string;
  body: Record<string, unknown> | undefined;
  authorization: string | undefined;
}

export interface SentMessage {
  id: string;
  channelId: string;
  body: Record<string, unknown>;
  /** Multipart sends: the file parts (`files[n]`). */
  files?: MultipartBody["files"];
}

interface Fault {
  status: number;
  retryAfter?: number;
  code?: number;
  message?: string;
}

interface Conn {
  ws: WebSocket;
  seq: number;
  sessionId?: string;
  ready: boolean;
}

const EPOCH = 1_420_070_400_000n;
let increment = 0n;
/** A real-shaped snowflake (timestamp, then a counter) so discord.js derives sane timestamps. */
export function snowflake(): string {
  increment = (increment + 1n) & 0xfffn;
  return String(((BigInt(Date.now()) - EPOCH) << 22n) | (1n << 17n) | increment);
}

export class FakeDiscord {
  readonly token = "fake.discord.bot-token";
  readonly bot: FakeDiscordUser = { id: snowflake(), username: "switchboard", global_name: null, bot: true };
  readonly guildId = snowflake();
  readonly textChannelId = snowflake();
  readonly users = new Map<string, FakeDiscordUser>();
  readonly channels = new Map<string, FakeChannel>();
  readonly calls: RestCall[] = [];
  readonly sent: SentMessage[] = [];
  readonly typing: string[] = [];
  /**
   * Message edits (`PATCH /channels/{id}/messages/{id}`) in order, with when they arrived;
   * `components` only when the edit carried them (`[]` removes a message's buttons).
   */
  readonly edits: Array<{
    channelId: string;
    messageId: string;
    content: string;
    components?: unknown[];
    at: number;
  }> = [];
  /**
   * Interaction responses (`POST /interactions/{id}/{token}/callback`, and the deferred reply's
   * `PATCH /webhooks/{app}/{token}/messages/@original` as `type: "edit"`), accepted or refused.
   */
  readonly interactionCallbacks: Array<{
    interactionId: string;
    type: number | "edit";
    body: Record<string, unknown> | undefined;
    authorization: string | undefined;
    /** HTTP status answered: 204 / 200 accepted; 404 unknown (expired) interaction, 400 acknowledged twice. */
    status: number;
  }> = [];
  /** Interactions dispatched (id → token, whether it was answered, whether its token has expired). */
  private readonly interactions = new Map<string, { token: string; answered: boolean; expired: boolean }>();
  /** IDENTIFY payloads received (token removed). */
  readonly identifies: Array<Record<string, unknown>> = [];
  /** Sessions that identified, by id (for RESUME). */
  readonly sessions = new Map<string, number>();
  /** What `GET /gateway/bot` answers as `url`; default this fake's own gateway. */
  gatewayBotUrl: string | undefined;
  /** When true, RESUME gets no answer until `releaseResumes()`. */
  holdResumes = false;
  /** Close code answered to IDENTIFY instead of READY (e.g. 4014 disallowed intents). */
  identifyCloseCode: number | undefined;
  /**
   * When true, a dispatch while no bot is connected waits for the next one to identify (a test
   * convenience for takeover tests; the real gateway does not replay events to a new session).
   */
  holdWhileOffline = false;
  private offline: Array<{ t: string; d: unknown }> = [];
  private loop!: LoopbackServer;
  private conns = new Set<Conn>();
  private heldResumes: Array<() => void> = [];
  private faults: Array<{ route: RegExp; fault: Fault }> = [];
  /** Attachment bytes served at `/att/<id>/<name>` (the CDN: no auth header). */
  private readonly attachments = new Map<string, { bytes: Buffer; contentType: string; stall?: boolean }>();
  /** Attachment downloads: the path and whatever Authorization header came with them. */
  readonly attachmentRequests: Array<{ path: string; authorization: string | undefined }> = [];

  static async start(): Promise<FakeDiscord> {
    const fake = new FakeDiscord();
    fake.channels.set(fake.textChannelId, {
      id: fake.textChannelId,
      type: 0,
      name: "general",
      guild_id: fake.guildId,
    });
    fake.loop = await loopbackServer((req, res) => void fake.handle(req, res), {
      ws: { path: "/gateway", onSocket: (ws) => fake.onSocket(ws) },
    });
    return fake;
  }

  private get port(): number {
    return this.loop.port;
  }

  /** What to put in the adapter's `apiUrl`. */
  get apiUrl(): string {
    return `http://127.0.0.1:${this.port}/api`;
  }

  get gatewayUrl(): string {
    return `ws://127.0.0.1:${this.port}/gateway`;
  }

  /** Identified gateway connections that are open. */
  get liveConnections(): number {
    return [...this.conns].filter((c) => c.ready && c.ws.readyState === c.ws.OPEN).length;
  }

  addUser(username: string): FakeDiscordUser {
    const user = { id: snowflake(), username, global_name: username[0]?.toUpperCase() + username.slice(1) };
    this.users.set(user.id, user);
    return user;
  }

  /** The DM channel between the bot and `user` (created on first use). */
  dmChannelOf(user: FakeDiscordUser): string {
    for (const ch of this.channels.values()) {
      if (ch.type === 1 && ch.recipients?.[0]?.id === user.id) return ch.id;
    }
    const id = snowflake();
    this.channels.set(id, { id, type: 1, recipients: [user] });
    return id;
  }

  // ------------------------------------------------------------------------------ injection

  /**
   * An attachment as MESSAGE_CREATE carries it (its URL on this fake's "CDN"). `stall`: the
   * download sends its headers and a few bytes, then nothing.
   */
  attachment(
    bytes: Buffer,
    filename: string,
    contentType: string,
    extra: Record<string, unknown> = {},
    stall = false,
  ): Record<string, unknown> {
    const id = snowflake();
    this.attachments.set(id, { bytes, contentType, ...(stall ? { stall } : {}) });
    const url = `http://127.0.0.1:${this.port}/att/${id}/${encodeURIComponent(filename)}?ex=1&is=2&hm=3`;
    return { id, filename, size: bytes.length, url, proxy_url: url, content_type: contentType, ...extra };
  }

  /** MESSAGE_CREATE in the user's DM with the bot; returns the message id. */
  dm(user: FakeDiscordUser, content: string): string {
    return this.message(this.dmChannelOf(user), user, content);
  }

  /**
   * MESSAGE_CREATE in a guild channel or thread. `mentions` lists mentioned users;
   * `replyTo` makes it a reply (type 19) to a message by that author.
   */
  message(
    channelId: string,
    author: FakeDiscordUser,
    content: string,
    opts: {
      mentions?: FakeDiscordUser[];
      replyTo?: { id: string; author: FakeDiscordUser };
      attachments?: Array<Record<string, unknown>>;
      flags?: number;
    } = {},
  ): string {
    const ch = this.channels.get(channelId);
    if (!ch) throw new Error(`fake discord: unknown channel ${channelId}`);
    const id = snowflake();
    this.dispatch("MESSAGE_CREATE", {
      ...messageObject(id, channelId, author, content),
      ...(ch.guild_id
        ? {
            guild_id: ch.guild_id,
            member: { roles: [], joined_at: new Date().toISOString(), deaf: false, mute: false, flags: 0 },
          }
        : { channel_type: ch.type }),
      mentions: (opts.mentions ?? []).map(userPayload),
      attachments: opts.attachments ?? [],
      ...(opts.flags ? { flags: opts.flags } : {}),
      type: opts.replyTo ? 19 : 0,
      ...(opts.replyTo
        ? {
            message_reference: {
              type: 0,
              message_id: opts.replyTo.id,
              channel_id: channelId,
              guild_id: ch.guild_id,
            },
            referenced_message: messageObject(opts.replyTo.id, channelId, opts.replyTo.author, "earlier"),
          }
        : {}),
    });
    return id;
  }

  /**
   * A user presses a button (INTERACTION_CREATE, type 3 MESSAGE_COMPONENT, component_type 2) on
   * `messageId` in `channelId` (a guild channel, a thread, or a DM channel: `dmChannelOf(user)`).
   * The interaction carries the full message when the bot sent it here, else a bare one (a
   * forged press). `expired`: its token is stale, so every response is refused with 10062.
   * Returns the interaction id.
   */
  press(
    channelId: string,
    user: FakeDiscordUser,
    messageId: string,
    customId: string,
    opts: { expired?: boolean; id?: string } = {},
  ): string {
    const ch = this.channels.get(channelId);
    if (!ch) throw new Error(`fake discord: unknown channel ${channelId}`);
    const id = opts.id ?? snowflake();
    const token = this.interactions.get(id)?.token ?? `itok-${id}`;
    if (!this.interactions.has(id))
      this.interactions.set(id, { token, answered: false, expired: opts.expired === true });
    const sent = this.sent.find((m) => m.id === messageId && m.channelId === channelId);
    const message = this.messagePayload(sent ?? { id: messageId, channelId, body: { content: "" } });
    this.dispatch("INTERACTION_CREATE", {
      id,
      application_id: this.bot.id,
      type: 3,
      token,
      version: 1,
      ...(ch.guild_id
        ? {
            guild_id: ch.guild_id,
            member: {
              user: userPayload(user),
              nick: null,
              roles: [],
              permissions: "0",
              joined_at: new Date().toISOString(),
              deaf: false,
              mute: false,
              flags: 0,
            },
          }
        : { user: userPayload(user) }),
      channel_id: channelId,
      channel: ch.parent_id
        ? threadPayload(ch)
        : { ...ch, ...(ch.recipients ? { recipients: ch.recipients.map(userPayload) } : {}) },
      app_permissions: "0",
      locale: "en-US",
      entitlements: [],
      authorizing_integration_owners: {},
      context: ch.guild_id ? 0 : 1,
      data: { custom_id: customId, component_type: 2 },
      message,
    });
    return id;
  }

  /** The answers to interaction `id` (callbacks and the deferred reply's edit), oldest first. */
  answersTo(id: string): FakeDiscord["interactionCallbacks"] {
    return this.interactionCallbacks.filter((c) => c.interactionId === id);
  }

  /** A user opens a thread under `parentId` (THREAD_CREATE); returns the thread id. */
  openThread(parentId: string, owner: FakeDiscordUser, name: string): string {
    return this.createThreadChannel(parentId, owner.id, name).id;
  }

  /** Sends one dispatch to every identified connection. */
  dispatch(t: string, d: unknown): void {
    if (this.holdWhileOffline && this.liveConnections === 0) {
      this.offline.push({ t, d });
      return;
    }
    for (const c of this.conns) {
      if (c.ready && c.ws.readyState === c.ws.OPEN) c.ws.send(JSON.stringify({ op: 0, t, s: ++c.seq, d }));
    }
  }

  /** Closes every gateway connection with a resumable code; discord.js reconnects and resumes. */
  dropConnections(code = 4000): void {
    for (const c of this.conns) c.ws.close(code, "fake drop");
  }

  /** RESUMEs waiting for `releaseResumes()`. */
  get heldResumeCount(): number {
    return this.heldResumes.length;
  }

  releaseResumes(): void {
    const held = this.heldResumes;
    this.heldResumes = [];
    for (const fn of held) fn();
  }

  /** The next REST call whose `METHOD /path` (after /api/v10) matches `route` fails with `fault`. */
  failNext(route: RegExp, fault: Fault): void {
    this.faults.push({ route, fault });
  }

  /**
   * Messages the bot sent, as chat targets: a DM's user, a channel, or a thread's parent plus
   * `threadId`.
   */
  sentTo(): Array<{ to: string; text: string; threadId?: string; body: Record<string, unknown> }> {
    return this.sent.map((m) => {
      const ch = this.channels.get(m.channelId);
      const text = String(m.body.content ?? "");
      if (ch?.type === 1 && ch.recipients?.[0]) return { to: ch.recipients[0].id, text, body: m.body };
      if (ch?.parent_id) return { to: ch.parent_id, threadId: ch.id, text, body: m.body };
      return { to: m.channelId, text, body: m.body };
    });
  }

  async close(): Promise<void> {
    await this.loop.close();
  }

  // ------------------------------------------------------------------------------ gateway

  private onSocket(ws: WebSocket): void {
    const conn: Conn = { ws, seq: 0, ready: false };
    this.conns.add(conn);
    ws.on("close", () => this.conns.delete(conn));
    ws.on("message", (raw) => this.onFrame(conn, String(raw)));
    ws.send(JSON.stringify({ op: 10, s: null, t: null, d: { heartbeat_interval: 41_250 } }));
  }

  private onFrame(conn: Conn, raw: string): void {
    const frame = JSON.parse(raw) as { op: number; d: Record<string, unknown> | null };
    if (frame.op === 1) {
      conn.ws.send(JSON.stringify({ op: 11 }));
    } else if (frame.op === 2) {
      const { token: _token, ...identify } = frame.d ?? {};
      this.identifies.push(identify);
      if (frame.d?.token !== this.token) {
        conn.ws.close(4004, "Authentication failed.");
        return;
      }
      if (this.identifyCloseCode) {
        conn.ws.close(this.identifyCloseCode, "Disallowed intent(s).");
        return;
      }
      conn.sessionId = `session-${snowflake()}`;
      conn.ready = true;
      this.sendDispatch(conn, "READY", {
        v: 10,
        user: { ...userPayload(this.bot), verified: true, mfa_enabled: false, flags: 0 },
        guilds: [{ id: this.guildId, unavailable: true }],
        session_id: conn.sessionId,
        resume_gateway_url: this.gatewayUrl,
        shard: [0, 1],
        application: { id: this.bot.id, flags: 0 },
        private_channels: [],
        user_settings: {},
        relationships: [],
      });
      this.sendDispatch(conn, "GUILD_CREATE", this.guildPayload());
      this.sessions.set(conn.sessionId, conn.seq);
      for (const e of this.offline.splice(0)) this.sendDispatch(conn, e.t, e.d);
    } else if (frame.op === 6) {
      const sessionId = String(frame.d?.session_id ?? "");
      if (!this.sessions.has(sessionId) || frame.d?.token !== this.token) {
        conn.ws.send(JSON.stringify({ op: 9, d: false }));
        return;
      }
      const resume = () => {
        conn.sessionId = sessionId;
        conn.seq = Number(frame.d?.seq ?? 0);
        conn.ready = true;
        this.sendDispatch(conn, "RESUMED", {});
      };
      if (this.holdResumes) this.heldResumes.push(resume);
      else resume();
    }
  }

  private sendDispatch(conn: Conn, t: string, d: unknown): void {
    conn.ws.send(JSON.stringify({ op: 0, t, s: ++conn.seq, d }));
  }

  private guildPayload(): Record<string, unknown> {
    const inGuild = [...this.channels.values()].filter((c) => c.guild_id === this.guildId);
    return {
      id: this.guildId,
      name: "Fake Guild",
      owner_id: this.bot.id,
      unavailable: false,
      joined_at: new Date().toISOString(),
      large: false,
      member_count: 2,
      features: [],
      emojis: [],
      stickers: [],
      roles: [
        {
          id: this.guildId,
          name: "@everyone",
          permissions: "1071698660929",
          position: 0,
          color: 0,
          hoist: false,
          managed: false,
          mentionable: false,
          flags: 0,
        },
      ],
      channels: inGuild
        .filter((c) => c.parent_id === undefined)
        .map((c) => ({ ...c, position: 0, permission_overwrites: [] })),
      threads: inGuild.filter((c) => c.parent_id !== undefined).map((c) => threadPayload(c)),
      members: [],
      presences: [],
      voice_states: [],
      stage_instances: [],
      guild_scheduled_events: [],
    };
  }

  private createThreadChannel(parentId: string, ownerId: string, name: string): FakeChannel {
    const thread: FakeChannel = {
      id: snowflake(),
      type: 11,
      name,
      guild_id: this.guildId,
      parent_id: parentId,
      owner_id: ownerId,
    };
    this.channels.set(thread.id, thread);
    this.dispatch("THREAD_CREATE", { ...threadPayload(thread), newly_created: true });
    return thread;
  }

  // ------------------------------------------------------------------------------ REST

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? "/", "http://x");
    if (req.method === "GET" && url.pathname.startsWith("/att/"))
      return this.serveAttachment(req, res, url.pathname);
    const type = req.headers["content-type"] ?? "";
    let body: Record<string, unknown> | undefined;
    let form: MultipartBody | undefined;
    if (type.startsWith("multipart/form-data")) {
      form = await parseMultipart(type, Buffer.concat(chunks));
      body = JSON.parse(form.fields.payload_json ?? "{}") as Record<string, unknown>;
    } else {
      const raw = Buffer.concat(chunks).toString("utf8");
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
    }
    const path = url.pathname.replace(/^\/api\/v10/, "");
    const method = req.method ?? "GET";
    const authorization = req.headers.authorization;
    this.calls.push({ method, path, body, authorization });

    const json = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(payload));
    };
    const error = (status: number, code: number, message: string) => json(status, { code, message });

    // Interaction responses authenticate with the interaction's token in the path, not the bot token.
    const callback = /^\/interactions\/(\d+)\/([^/]+)\/callback$/.exec(path);
    if (callback && method === "POST")
      return this.onCallback(callback[1] as string, callback[2] as string, body, authorization, res);
    const original = /^\/webhooks\/(\d+)\/([^/]+)\/messages\/(?:@|%40)original$/.exec(path);
    if (original && method === "PATCH")
      return this.onOriginalEdit(original[2] as string, body, authorization, res);

    if (authorization !== `Bot ${this.token}`) return error(401, 0, "401: Unauthorized");
    const faultAt = this.faults.findIndex((f) => f.route.test(`${method} ${path}`));
    if (faultAt >= 0) {
      const { fault } = this.faults.splice(faultAt, 1)[0] as { fault: Fault };
      if (fault.status === 429) {
        const after = fault.retryAfter ?? 1;
        return json(
          429,
          { message: "You are being rate limited.", retry_after: after, global: false },
          { "retry-after": String(after) },
        );
      }
      return error(fault.status, fault.code ?? 0, fault.message ?? "fault");
    }

    if (method === "GET" && path === "/gateway/bot") {
      return json(200, {
        url: this.gatewayBotUrl ?? this.gatewayUrl,
        shards: 1,
        session_start_limit: { total: 1000, remaining: 999, reset_after: 14_400_000, max_concurrency: 1 },
      });
    }
    if (method === "POST" && path === "/users/@me/channels") {
      const user = this.users.get(String(body?.recipient_id));
      if (!user) return error(400, 50_035, "Invalid Form Body");
      const id = this.dmChannelOf(user);
      return json(200, { id, type: 1, recipients: [userPayload(user)], last_message_id: null });
    }
    const edit = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path);
    if (edit && method === "PATCH") {
      const msg = this.sent.find((s) => s.channelId === edit[1] && s.id === edit[2]);
      if (!msg) return error(404, 10_008, "Unknown Message");
      const content = String(body?.content ?? "");
      const components = Array.isArray(body?.components) ? (body.components as unknown[]) : undefined;
      if (components && !componentsValid(components))
        return error(400, 50_035, "Invalid Form Body (components)");
      msg.body = { ...msg.body, content, ...(components ? { components } : {}) };
      this.edits.push({
        channelId: edit[1] as string,
        messageId: edit[2] as string,
        content,
        ...(components ? { components } : {}),
        at: Date.now(),
      });
      return json(200, this.messagePayload(msg));
    }
    const m = /^\/channels\/(\d+)(?:\/(messages|typing|threads))?$/.exec(path);
    const ch = m ? this.channels.get(m[1] as string) : undefined;
    if (m && !ch) return error(404, 10_003, "Unknown Channel");
    if (m && ch) {
      if (method === "GET" && !m[2]) return json(200, ch.parent_id ? threadPayload(ch) : ch);
      if (method === "POST" && m[2] === "typing") {
        this.typing.push(ch.id);
        // No content-type on 204: @discordjs/rest would try to parse an empty JSON body.
        res.writeHead(204);
        return void res.end();
      }
      if (method === "POST" && m[2] === "messages") {
        const content = typeof body?.content === "string" ? body.content : "";
        // Discord refuses bot content over 2,000 characters (Invalid Form Body, BASE_TYPE_MAX_LENGTH).
        if (content.length > DISCORD_CONTENT_LIMIT)
          return json(400, {
            code: 50_035,
            message: "Invalid Form Body",
            errors: {
              content: {
                _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 2000 or fewer in length." }],
              },
            },
          });
        if (body?.components !== undefined && !componentsValid(body.components))
          return error(400, 50_035, "Invalid Form Body (components)");
        const sent: SentMessage = {
          id: snowflake(),
          channelId: ch.id,
          body: body ?? {},
          ...(form ? { files: form.files } : {}),
        };
        this.sent.push(sent);
        return json(200, this.messagePayload(sent));
      }
      if (method === "POST" && m[2] === "threads") {
        if (ch.type !== 0 && ch.type !== 5)
          return error(400, 50_024, "Cannot execute action on this channel type");
        const thread = this.createThreadChannel(ch.id, this.bot.id, String(body?.name ?? ""));
        return json(201, threadPayload(thread));
      }
    }
    error(404, 0, "404: Not Found");
  }

  /** A message the bot sent, as the API returns it (and as an interaction carries it). */
  private messagePayload(m: SentMessage): Record<string, unknown> {
    const components = Array.isArray(m.body.components) ? m.body.components : [];
    return messageObject(m.id, m.channelId, this.bot, m.body.content ?? "", components);
  }

  /**
   * `POST /interactions/{id}/{token}/callback`: 204 without a content-type (as Discord answers
   * `with_response=false`); an unknown interaction, a wrong or expired token → 404 10062; a second
   * response to one interaction → 400 40060.
   */
  private onCallback(
    id: string,
    token: string,
    body: Record<string, unknown> | undefined,
    authorization: string | undefined,
    res: http.ServerResponse,
  ): void {
    const it = this.interactions.get(id);
    const record = (status: number) =>
      this.interactionCallbacks.push({
        interactionId: id,
        type: typeof body?.type === "number" ? body.type : -1,
        body,
        authorization,
        status,
      });
    const refuse = (status: number, code: number, message: string) => {
      record(status);
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify({ code, message }));
    };
    if (!it || it.token !== token || it.expired) {
      refuse(404, 10_062, "Unknown interaction");
      return;
    }
    if (it.answered) {
      refuse(400, 40_060, "Interaction has already been acknowledged.");
      return;
    }
    it.answered = true;
    record(204);
    res.writeHead(204);
    res.end();
  }

  /** The deferred reply's edit (`PATCH /webhooks/{app}/{token}/messages/@original`). */
  private onOriginalEdit(
    token: string,
    body: Record<string, unknown> | undefined,
    authorization: string | undefined,
    res: http.ServerResponse,
  ): void {
    const id = [...this.interactions.entries()].find(([, v]) => v.token === token)?.[0];
    const ok = id !== undefined && this.interactions.get(id)?.answered === true;
    this.interactionCallbacks.push({
      interactionId: id ?? "?",
      type: "edit",
      body,
      authorization,
      status: ok ? 200 : 404,
    });
    res.writeHead(ok ? 200 : 404, { "content-type": "application/json" });
    res.end(
      JSON.stringify(
        ok
          ? this.messagePayload({ id: snowflake(), channelId: "0", body: body ?? {} })
          : { code: 10_008, message: "Unknown Message" },
      ),
    );
  }

  private serveAttachment(req: http.IncomingMessage, res: http.ServerResponse, path: string): void {
    this.attachmentRequests.push({ path, authorization: req.headers.authorization });
    const a = this.attachments.get(path.split("/")[2] ?? "");
    if (!a) {
      res.writeHead(404);
      return void res.end();
    }
    res.writeHead(200, { "content-type": a.contentType, "content-length": String(a.bytes.length) });
    if (a.stall) return void res.write(a.bytes.subarray(0, 8));
    res.end(a.bytes);
  }
}

function userPayload(u: FakeDiscordUser): Record<string, unknown> {
  return {
    id: u.id,
    username: u.username,
    discriminator: "0",
    global_name: u.global_name ?? null,
    avatar: null,
    ...(u.bot ? { bot: true } : {}),
  };
}

/** A message object as the API returns it (sends, edits, an interaction's message, a reply's reference). */
function messageObject(
  id: string,
  channelId: string,
  author: FakeDiscordUser,
  content: unknown,
  components: unknown[] = [],
): Record<string, unknown> {
  return {
    id,
    channel_id: channelId,
    author: userPayload(author),
    content,
    timestamp: new Date().toISOString(),
    edited_timestamp: null,
    tts: false,
    mention_everyone: false,
    mentions: [],
    mention_roles: [],
    attachments: [],
    embeds: [],
    components,
    pinned: false,
    type: 0,
  };
}

function threadPayload(c: FakeChannel): Record<string, unknown> {
  return {
    id: c.id,
    type: c.type,
    guild_id: c.guild_id,
    parent_id: c.parent_id,
    owner_id: c.owner_id,
    name: c.name,
    last_message_id: null,
    message_count: 0,
    member_count: 1,
    rate_limit_per_user: 0,
    flags: 0,
    thread_metadata: {
      archived: false,
      auto_archive_duration: 1440,
      archive_timestamp: new Date().toISOString(),
      locked: false,
    },
  };
}

/** Message `content` longer than this is refused with 400 Invalid Form Body. */
export const DISCORD_CONTENT_LIMIT = 2000;

/**
 * Discord's rules for message components as the fake checks them: at most 5 action rows (type 1)
 * of 1–5 buttons (type 2); a button with a custom_id of 1–100 characters, unique in the message,
 * a label of at most 80 and a style 1–4 (5 is a link button, which has a url and no custom_id).
 */
export function componentsValid(components: unknown): boolean {
  if (!Array.isArray(components) || components.length > 5) return false;
  const ids = new Set<string>();
  for (const row of components as Array<Record<string, unknown>>) {
    if (row?.type !== 1 || !Array.isArray(row.components)) return false;
    const buttons = row.components as Array<Record<string, unknown>>;
    if (buttons.length < 1 || buttons.length > 5) return false;
    for (const b of buttons) {
      const id = b?.custom_id;
      if (b?.type !== 2 || typeof id !== "string" || id.length < 1 || id.length > 100 || ids.has(id))
        return false;
      if (typeof b.label !== "string" || b.label.length > 80) return false;
      if (typeof b.style !== "number" || b.style < 1 || b.style > 4) return false;
      ids.add(id);
    }
  }
  return true;
}
