import { existsSync, readFileSync, statSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createApp } from "../../src/app/index.js";
import { parseConfig } from "../../src/config/index.js";
import { isLoopbackIp, resolvesToLoopback } from "../../src/gateway/hosts.js";
import { jsonNestingDepth } from "../../src/json-limits.js";
import { silentLogger } from "../../src/log.js";
import { startTestApp, type TestApp } from "../harness.js";
import { tempDir } from "../helpers.js";

/**
 * Local web security (issue 12, docs/security.md): no cross-origin page, rebinding DNS name or
 * other local user drives the gateway; malformed calls answer 4xx and never crash it.
 */

let t: TestApp;
let port: number;

beforeAll(async () => {
  t = await startTestApp(
    { gateway: { allowedHosts: ["gw.example.lan"], allowedOrigins: ["https://ok.example"] } },
    {
      listen: true,
    },
  );
  port = t.app.address?.port ?? 0;
});
afterAll(async () => t?.stop());

/** A raw HTTP request: full control over Host, Origin and Content-Type. */
function request(opts: {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method: opts.method ?? "POST",
        path: opts.path ?? "/rpc",
        headers: { host: `127.0.0.1:${port}`, ...opts.headers },
      },
      (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

const auth = () => ({ authorization: `Bearer ${t.token}`, "content-type": "application/json" });
const call = (body: unknown, headers: Record<string, string> = {}) =>
  request({
    headers: { ...auth(), ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

/** Opens a WebSocket; resolves with the HTTP status of a refused handshake, or the open socket. */
function openWs(
  p: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; ws?: WebSocket }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${p}`, { headers });
    ws.once("open", () => resolve({ status: 101, ws }));
    ws.once("unexpected-response", (req, res) => {
      // With this listener ws leaves the refused request open: end it, or the server waits on it.
      res.resume();
      req.destroy();
      resolve({ status: res.statusCode ?? 0 });
    });
    ws.once("error", reject);
  });
}

function nextFrame(ws: WebSocket): Promise<Record<string, any>> {
  return new Promise((resolve) => ws.once("message", (d) => resolve(JSON.parse(d.toString()))));
}

describe("a gateway token is generated at first start", () => {
  it("keeps it 0600 in the state dir, requires it, records its URL, and reuses it", async () => {
    const file = path.join(t.dir, "gateway.token");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8").trim()).toBe(t.token);
    expect(t.token?.length).toBeGreaterThanOrEqual(40);
    const info = path.join(t.dir, "gateway.json");
    expect(statSync(info).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(info, "utf8"))).toMatchObject({
      url: `http://127.0.0.1:${port}`,
      pid: process.pid,
    });

    expect(
      (await request({ headers: { "content-type": "application/json" }, body: '{"method":"health"}' }))
        .status,
    ).toBe(401);
    expect((await call({ method: "health" }, { authorization: "Bearer nope" })).status).toBe(401);
    expect((await call({ method: "health" })).status).toBe(200);
    const ws = await openWs("/ws");
    const closed = await new Promise<number>((resolve) => ws.ws?.once("close", (code) => resolve(code)));
    expect(closed).toBe(4401);

    const d = tempDir();
    const first = await startTestApp({}, { listen: true, dir: d.dir });
    const firstToken = first.token;
    await first.stop();
    expect(existsSync(path.join(d.dir, "gateway.json"))).toBe(false);
    const second = await startTestApp({}, { listen: true, dir: d.dir });
    await second.stop();
    d.cleanup();
    expect(second.token).toBe(firstToken);
  });
});

describe("cross-origin control is impossible", () => {
  it("a text/plain POST (no CORS preflight) is refused and has no effect", async () => {
    await t.rpc("chat.send", { sessionKey: "agent:main:csrf", message: "x", timeoutSeconds: 20 });
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "",
    ]) {
      const r = await request({
        headers: { authorization: `Bearer ${t.token}`, ...(type ? { "content-type": type } : {}) },
        body: JSON.stringify({ method: "sessions.delete", params: { sessionKey: "agent:main:csrf" } }),
      });
      expect(r.status).toBe(415);
      expect(r.body).not.toContain("deleted");
    }
    expect(await t.app.services.store.sessions.get("agent:main:csrf")).not.toBeNull();
  });

  it("a POST with a foreign Origin is 403, even with the token; the gateway's own origin passes", async () => {
    await t.rpc("chat.send", { sessionKey: "agent:main:csrf", message: "x", timeoutSeconds: 20 });
    const evil = await call(
      { method: "sessions.delete", params: { sessionKey: "agent:main:csrf" } },
      { origin: "http://evil.example" },
    );
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body).error.code).toBe("FORBIDDEN");
    expect((await call({ method: "health" }, { origin: "null" })).status).toBe(403);
    expect(
      (await call({ method: "health" }, { origin: `http://localhost:${port}`, host: `127.0.0.1:${port}` }))
        .status,
    ).toBe(403);
    expect((await call({ method: "health" }, { origin: `http://127.0.0.1:${port}` })).status).toBe(200);
    expect((await call({ method: "health" }, { origin: "https://ok.example" })).status).toBe(200);
    expect(await t.app.services.store.sessions.get("agent:main:csrf")).not.toBeNull();
  });

  it("WebSocket upgrades with a foreign Origin are refused on /ws and /webchat/ws", async () => {
    const q = `token=${t.token}`;
    expect((await openWs(`/ws?${q}`, { origin: "http://evil.example" })).status).toBe(403);
    expect((await openWs(`/webchat/ws?v=visitor-0001&${q}`, { origin: "http://evil.example" })).status).toBe(
      403,
    );
    const own = await openWs(`/ws?${q}`, { origin: `http://127.0.0.1:${port}` });
    expect(own.status).toBe(101);
    own.ws?.send(JSON.stringify({ id: 1, method: "health" }));
    expect(await nextFrame(own.ws as WebSocket)).toMatchObject({ id: 1, ok: true });
    own.ws?.close();
    // A non-browser client sends no Origin: it still needs the token.
    const cli = await openWs(`/webchat/ws?v=visitor-0001&${q}`);
    expect(cli.status).toBe(101);
    cli.ws?.close();
  });

  it("a foreign Host (DNS rebinding) is 403 on pages, RPC and sockets; configured names pass", async () => {
    for (const host of [
      "attacker.example",
      `attacker.example:${port}`,
      `127.evil.invalid:${port}`,
      "localhost.evil.example",
    ]) {
      expect((await call({ method: "health" }, { host })).status).toBe(403);
      expect((await request({ method: "GET", path: "/", headers: { host } })).status).toBe(403);
      expect((await request({ method: "GET", path: "/dashboard", headers: { host } })).status).toBe(403);
      expect((await openWs(`/ws?token=${t.token}`, { host })).status).toBe(403);
      expect((await openWs(`/webchat/ws?v=visitor-0001&token=${t.token}`, { host })).status).toBe(403);
    }
    for (const host of [`localhost:${port}`, `[::1]:${port}`, `127.0.0.1:${port}`, `gw.example.lan:${port}`])
      expect((await call({ method: "health" }, { host })).status).toBe(200);
    // Probes and platform webhooks (signed) are outside the Host check.
    expect(
      (await request({ method: "GET", path: "/healthz", headers: { host: "anything.example" } })).status,
    ).toBe(200);
  });

  it("loopback is decided on resolved addresses, not the spelling", async () => {
    expect(isLoopbackIp("127.0.0.1")).toBe(true);
    expect(isLoopbackIp("::ffff:127.0.0.1")).toBe(true);
    expect(isLoopbackIp("127.evil.invalid")).toBe(false);
    expect(await resolvesToLoopback("127.evil.invalid")).toBe(false);
    expect(await resolvesToLoopback("localhost")).toBe(true);
    expect(await resolvesToLoopback("10.0.0.1")).toBe(false);
    const d = tempDir();
    await expect(
      createApp(
        {
          config: parseConfig({ stateDir: d.dir, gateway: { host: "127.evil.invalid", port: 0 } }),
          source: null,
          baseDir: d.dir,
        },
        { logger: silentLogger(), role: "gateway" },
      ),
    ).rejects.toThrow(/gateway\.auth\.token/);
    d.cleanup();
  });
});

describe("malformed calls answer 4xx with a code", () => {
  const deep = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;

  it("a JSON-RPC id must be a string, number or null", async () => {
    for (const id of [{}, [1], true, { a: [1] }, "x".repeat(300)]) {
      const r = await call({ id, method: "health" });
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ id: null, ok: false, error: { code: "INVALID_PARAMS" } });
      expect(JSON.parse(r.body).error.message).toContain("id");
    }
    const deepId = await call(`{"id":${deep(10_000)},"method":"health"}`);
    expect(deepId.status).toBe(400);
    for (const id of ["a", 7, null])
      expect(JSON.parse((await call({ id, method: "health" })).body)).toMatchObject({ id, ok: true });
    expect((await call({ params: {} })).status).toBe(400);
    expect((await call("[]")).status).toBe(400);
  });

  it("nesting beyond gateway.maxJsonDepth is refused over HTTP and WebSocket; the socket stays usable", async () => {
    expect(jsonNestingDepth('{"a":"[[[[","b":[[1]]}')).toBe(3);
    const r = await call(`{"method":"health","params":{"x":${deep(100_000)}}}`);
    expect(r.status).toBe(400);
    expect(r.body).toContain("nested deeper");
    const { ws } = await openWs(`/ws?token=${t.token}`);
    const sock = ws as WebSocket;
    sock.send(`{"id":${deep(10_000)},"method":"health"}`);
    expect(await nextFrame(sock)).toMatchObject({ id: null, ok: false, error: { code: "INVALID_PARAMS" } });
    sock.send(JSON.stringify({ id: { nested: true }, method: "health" }));
    expect(await nextFrame(sock)).toMatchObject({ id: null, ok: false, error: { code: "INVALID_PARAMS" } });
    sock.send(Buffer.from([0xff, 0xfe, 0x00]));
    expect(await nextFrame(sock)).toMatchObject({ ok: false, error: { code: "INVALID_PARAMS" } });
    sock.send(JSON.stringify({ id: "after", method: "health" }));
    expect(await nextFrame(sock)).toMatchObject({ id: "after", ok: true });
    sock.close();
  });

  it("the default body limit fits a 10 MB attachment call", async () => {
    await t.rpc("chat.send", { sessionKey: "main", message: "hi", timeoutSeconds: 20 });
    const content = Buffer.alloc(10 * 1024 * 1024, 7).toString("base64");
    const r = await call({
      id: 1,
      method: "tools.invoke",
      params: {
        sessionKey: "main",
        tool: "sessions_spawn",
        args: { task: "t", attachments: [{ name: "big.bin", content, encoding: "base64" }] },
      },
    });
    expect(r.status, r.body.slice(0, 300)).toBe(200);
    // Attachments are off by default: the call arrived and was judged, not cut off at the door.
    expect(JSON.parse(r.body).result.status).toBe("forbidden");
  });
});
