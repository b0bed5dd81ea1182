/**
 * An in-process Switchboard for integration tests: the real composition root on a temp state
 * dir, optionally listening on port 0, plus shortcuts for RPC and tool invocation.
 */
import { Writable } from "node:stream";
import { type App, createApp } from "../src/app/index.js";
import {
  type AdapterContext,
  type ChannelAdapter,
  type ChannelCapabilities,
  type InboundHandler,
  type InboundMessage,
  inboundMessageSchema,
} from "../src/channels/types.js";
import { main } from "../src/cli/main.js";
import { type ConfigInput, parseConfig } from "../src/config/index.js";
import type { AdapterRegistry } from "../src/delivery/index.js";
import { createLogger, type Logger, silentLogger } from "../src/log.js";
import { MemoryChannel } from "./fakes/memory-channel.js";
import { tempDir } from "./helpers.js";

export interface TestApp {
  app: App;
  dir: string;
  /** The gateway's bearer token (configured or generated); null when not listening. */
  token: string | null;
  /** Base URL when listening (`http://127.0.0.1:<port>`), else null. */
  url: string | null;
  /** Headers an authorised JSON client sends. */
  headers(): Record<string, string>;
  /** Dispatch an RPC in process (same path as POST /rpc after parsing). */
  rpc<T = any>(
    method: string,
    params?: Record<string, unknown>,
  ): Promise<{ ok: boolean; result?: T; error?: { code: string; message: string } }>;
  /** `tools.invoke` as the agent of `sessionKey`; throws on RPC errors. */
  invoke<T = any>(sessionKey: string, tool: string, args?: Record<string, unknown>): Promise<T>;
  stop(): Promise<void>;
}

export async function startTestApp(
  overrides: Partial<ConfigInput> = {},
  opts: { listen?: boolean; dir?: string; now?: () => number; logger?: Logger } = {},
): Promise<TestApp> {
  const t = opts.dir ? { dir: opts.dir, cleanup: () => {} } : tempDir();
  const config = parseConfig({
    stateDir: t.dir,
    ...overrides,
    gateway: { port: 0, ...(overrides.gateway ?? {}) },
  });
  const app = await createApp(
    { config, source: null, baseDir: t.dir },
    {
      logger: opts.logger ?? silentLogger(),
      role: "gateway",
      serve: opts.listen ?? false,
      ...(opts.now ? { now: opts.now } : {}),
    },
  );
  await app.start();
  const rpc: TestApp["rpc"] = async (method, params = {}) => {
    const r = await app.rpc.dispatch({ id: 1, method, params });
    return r.ok ? { ok: true, result: r.result as never } : { ok: false, error: r.error };
  };
  return {
    app,
    dir: t.dir,
    token: app.token,
    url: app.url,
    headers: () => ({
      "content-type": "application/json",
      ...(app.token ? { authorization: `Bearer ${app.token}` } : {}),
    }),
    rpc,
    async invoke(sessionKey, tool, args = {}) {
      const r = await rpc("tools.invoke", { sessionKey, tool, args });
      if (!r.ok)
        throw Object.assign(new Error(`${r.error?.code}: ${r.error?.message}`), { code: r.error?.code });
      return r.result as never;
    },
    async stop() {
      await app.stop();
      if (!opts.dir) t.cleanup();
    },
  };
}

/** `switchboard ARGS --url … --token …` in process against a listening TestApp. */
/** `POST /media` of one file as the web chat uploads it (multipart, `file`), with the bearer token unless `auth` is false. */
export function postMedia(
  t: TestApp,
  bytes: Buffer,
  name: string,
  type: string,
  auth = true,
): Promise<Response> {
  const form = new FormData();
  form.append("file", new Blob([bytes], { type }), name);
  return fetch(`${t.url}/media`, {
    method: "POST",
    body: form,
    headers: auth ? { authorization: `Bearer ${t.token}` } : {},
  });
}

export async function cliAgainst(
  t: TestApp,
  ...args: string[]
): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, "--url", t.url ?? "", "--token", t.token ?? ""], {
    out: (s) => out.push(s),
    err: (s) => err.push(s),
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

/** A logger at `level` whose lines (raw JSON text, one chunk each) land in `lines`. */
export function capturingLogger(level = "info"): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = createLogger({
    level,
    destination: new Writable({
      write(chunk, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    }),
  });
  return { logger, lines };
}

/** A `switchboard worker` in process (no channels, no RPC) on its own temp state dir. */
export async function startTestWorker(
  overrides: Partial<ConfigInput> = {},
  opts: { metricsPort?: number; metricsHost?: string } = {},
): Promise<{ app: App; stop(): Promise<void> }> {
  const t = tempDir();
  const app = await createApp(
    { config: parseConfig({ stateDir: t.dir, ...overrides }), source: null, baseDir: t.dir },
    { logger: silentLogger(), role: "worker", ...opts },
  );
  await app.start();
  return {
    app,
    async stop() {
      await app.stop();
      t.cleanup();
    },
  };
}

/** `adapter` added to `t`'s channels and started with `onInbound` (default: drops inbound) and `ctx`. */
export async function attachChannel<A extends ChannelAdapter>(
  t: TestApp,
  adapter: A,
  onInbound: InboundHandler = async () => {},
  ctx?: AdapterContext,
): Promise<A> {
  (t.app.services.channels as AdapterRegistry).add(adapter);
  await adapter.start(onInbound, ctx);
  return adapter;
}

/** A "memory"/"default" channel as a plain chat: 4000 chars, no threads or typing, `caps` on top. */
export function plainMemoryChannel(caps: Partial<ChannelCapabilities> = {}): MemoryChannel {
  return new MemoryChannel("memory", "default", {
    textLimit: 4000,
    threads: false,
    typing: false,
    markdown: "plain",
    createThread: false,
    ...caps,
  });
}

let inboundSeq = 0;
/** A direct message from "u1" on the "memory"/"default" channel (a fresh messageId each), `p` on top. */
export function memoryInbound(p: Partial<InboundMessage> & { text: string }): InboundMessage {
  return inboundMessageSchema.parse({
    channel: "memory",
    accountId: "default",
    chatType: "direct",
    peerId: "u1",
    senderId: "u1",
    messageId: `m${++inboundSeq}`,
    ...p,
  });
}
