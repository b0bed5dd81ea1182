import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type App, createApp } from "../../src/app/index.js";
import { parseConfig } from "../../src/config/index.js";
import { silentLogger } from "../../src/log.js";
import { eventually, tempDir } from "../helpers.js";

/** The real gateway on port 0, driven over HTTP and WebSocket. */

let app: App;
let base: string;
let cleanup: () => void;

async function rpc(
  method: string,
  params: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${base}/rpc`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${app.token}`, ...headers },
    body: JSON.stringify({ id: 7, method, params }),
  });
  return {
    status: res.status,
    body: (await res.json()) as { id: unknown; ok: boolean; result?: any; error?: any },
  };
}

beforeAll(async () => {
  const t = tempDir();
  cleanup = t.cleanup;
  const config = parseConfig({ stateDir: t.dir, gateway: { port: 0, maxBodyBytes: 1024 * 1024 } });
  app = await createApp(
    { config, source: null, baseDir: t.dir },
    { logger: silentLogger(), role: "gateway" },
  );
  await app.start();
  base = `http://127.0.0.1:${app.address?.port}`;
});

afterAll(async () => {
  await app?.stop();
  cleanup?.();
});

describe("HTTP surface", () => {
  it("healthz without auth, landing page at /", async () => {
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ ok: true });
    const page = await fetch(`${base}/`);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(await page.text()).toContain("/webchat/ws");
  });

  it("health reports storage, queue and the demo model", async () => {
    const { body } = await rpc("health");
    expect(body).toMatchObject({ id: 7, ok: true, result: { ok: true, storage: "fs", queue: "local" } });
    expect(body.result.model).toContain("scripted");
    expect(body.result.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(body.result.version).not.toBe("0.0.0");
    // channels by name (API.md §4), each account's state under accounts (§8.5's per-account
    // objects only with leases, i.e. the redis store)
    expect(Object.keys(body.result.channels)).toEqual(["webchat"]);
    expect(body.result.accounts).toEqual({ "webchat:default": body.result.channels.webchat });
    // the transcript tail cache's use, so an operator can see whether busy sessions fit in it
    expect(body.result.transcriptCache).toMatchObject({ maxChars: 12 * 1024 * 1024, fills: 0 });
  });

  it("400 for unparseable JSON, never a 5xx", async () => {
    const res = await fetch(`${base}/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${app.token}` },
      body: "{nope",
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("INVALID_PARAMS");
  });

  it("bodies over gateway.maxBodyBytes are refused with a 4xx", async () => {
    const limit = app.services.config.gateway.maxBodyBytes;
    const big = JSON.stringify({ method: "health", params: { pad: "x".repeat(limit + 10) } });
    const res = await fetch(`${base}/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${app.token}` },
      body: big,
    });
    expect(res.status).toBe(413);
  });

  it("INVALID_PARAMS names the field; unknown method and session are NOT_FOUND", async () => {
    const bad = await rpc("sessions.history", { limit: -1 });
    expect(bad.status).toBe(200);
    expect(bad.body.error.code).toBe("INVALID_PARAMS");
    expect(bad.body.error.message).toContain("sessionKey");
    expect(bad.body.error.message).toContain("limit");
    expect((await rpc("nope.nope")).body.error.code).toBe("NOT_FOUND");
    expect(
      (await rpc("sessions.history", { sessionKey: "agent:main:discord:group:zzz" })).body.error.code,
    ).toBe("NOT_FOUND");
    expect((await rpc("runs.get", { runId: "missing" })).body.error.code).toBe("NOT_FOUND");
    expect((await rpc("agent.wait", { runId: "missing", timeoutMs: 10 })).body.error.code).toBe("NOT_FOUND");
  });
});

describe("a conversation over RPC", () => {
  it("chat.send creates the session, runs a turn and returns the scripted reply", async () => {
    const { body } = await rpc("chat.send", {
      sessionKey: "main",
      message: "hello there",
      timeoutSeconds: 20,
    });
    expect(body.ok).toBe(true);
    expect(body.result).toMatchObject({ status: "ok", sessionKey: "agent:main:main" });
    expect(body.result.reply).toContain("hello there");
    expect(body.result.reply.toLowerCase()).toContain("scripted");

    const run = await rpc("runs.get", { runId: body.result.runId });
    expect(run.body.result).toMatchObject({ status: "ok", sessionKey: "agent:main:main" });
    const wait = await rpc("agent.wait", { runId: body.result.runId, timeoutMs: 1000 });
    expect(wait.body.result).toMatchObject({ status: "ok" });

    const list = await rpc("sessions.list", { messageLimit: 2 });
    const row = list.body.result.sessions.find((s: { key: string }) => s.key === "agent:main:main");
    expect(row).toMatchObject({ kind: "main", agentId: "main" });
    expect(row.messages.length).toBe(2);

    const hist = await rpc("sessions.history", { sessionKey: "main" });
    expect(hist.body.result.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant"]);
  });

  it("chat.send takes any timeoutSeconds ≥ 0, as sessions_send does (an hour-long wait is valid)", async () => {
    const { body } = await rpc("chat.send", {
      sessionKey: "agent:main:long-wait",
      message: "hi",
      timeoutSeconds: 7200,
    });
    expect(body.ok).toBe(true);
    expect(body.result).toMatchObject({ status: "ok", sessionKey: "agent:main:long-wait" });
    const bad = await rpc("chat.send", {
      sessionKey: "agent:main:long-wait",
      message: "hi",
      timeoutSeconds: -1,
    });
    expect(bad.body.error).toMatchObject({ code: "INVALID_PARAMS" });
    expect(bad.body.error.message).toContain("timeoutSeconds");
  });

  it("chat.send stores the operator's message with a provenance kind of API.md §6", async () => {
    const { body } = await rpc("chat.send", {
      sessionKey: "agent:main:operator-line",
      message: "from the operator",
      timeoutSeconds: 20,
    });
    expect(body.result.status).toBe("ok");
    const entry = await app.services.store.sessions.get("agent:main:operator-line");
    const lines = await app.services.store.transcripts.readTail(
      { agentId: "main", sessionId: entry!.sessionId },
      { limit: 10 },
    );
    const user = lines.find((m) => m.role === "user");
    expect(user?.content).toBe("from the operator");
    const kinds = ["external_user", "inter_session", "subagent_announce", "hook", "cron", "system"];
    expect(kinds).toContain(user?.provenance?.kind);
    // marked as the operator's: no platform channel, the operator as sender
    expect(user?.provenance).toEqual({ kind: "external_user", senderId: "operator" });
  });

  it("chat.send with timeoutSeconds 0 is accepted at once; agent.wait gets the result", async () => {
    const { body } = await rpc("chat.send", {
      sessionKey: "agent:main:ops",
      message: "ping",
      timeoutSeconds: 0,
    });
    expect(body.result.status).toBe("accepted");
    const wait = await rpc("agent.wait", { runId: body.result.runId, timeoutMs: 20_000 });
    expect(wait.body.result.status).toBe("ok");
    expect(wait.body.result.reply).toContain("ping");
  });

  it("sessions.patch sets and clears fields; sendPolicy deny blocks chat.send", async () => {
    await rpc("chat.send", { sessionKey: "agent:main:patchme", message: "x", timeoutSeconds: 20 });
    const p = await rpc("sessions.patch", {
      sessionKey: "agent:main:patchme",
      patch: { label: "ops", sendPolicy: "deny" },
    });
    expect(p.body.result.entry).toMatchObject({ label: "ops", sendPolicy: "deny" });
    const blocked = await rpc("chat.send", {
      sessionKey: "agent:main:patchme",
      message: "y",
      timeoutSeconds: 5,
    });
    expect(blocked.body.result.status).toBe("error");
    expect(blocked.body.result.error).toContain("send blocked by session policy");
    const cleared = await rpc("sessions.patch", {
      sessionKey: "agent:main:patchme",
      patch: { sendPolicy: null },
    });
    expect(cleared.body.result.entry.sendPolicy).toBeUndefined();
    // "inherit" clears the override as null does.
    await rpc("sessions.patch", { sessionKey: "agent:main:patchme", patch: { sendPolicy: "deny" } });
    const inherit = await rpc("sessions.patch", {
      sessionKey: "agent:main:patchme",
      patch: { sendPolicy: "inherit" },
    });
    expect(inherit.body.ok).toBe(true);
    expect(inherit.body.result.entry.sendPolicy).toBeUndefined();
    // verboseLevel can be set and cleared, and shows in rows.
    const verbose = await rpc("sessions.patch", {
      sessionKey: "agent:main:patchme",
      patch: { verboseLevel: "full" },
    });
    expect(verbose.body.result.entry.verboseLevel).toBe("full");
    const listed = await rpc("sessions.list", { search: "patchme" });
    expect(listed.body.result.sessions[0]).toMatchObject({ verboseLevel: "full" });
    const st = await rpc("tools.invoke", {
      sessionKey: "agent:main:patchme",
      tool: "session_status",
      args: { verboseLevel: "on" },
    });
    expect(st.body.result).toMatchObject({ status: "ok", verboseLevel: "on" });
    expect(st.body.result.statusText).toContain("verbose on");
    const unset = await rpc("sessions.patch", {
      sessionKey: "agent:main:patchme",
      patch: { verboseLevel: null },
    });
    expect(unset.body.result.entry.verboseLevel).toBeUndefined();
    expect(
      (await rpc("sessions.patch", { sessionKey: "agent:main:patchme", patch: { verboseLevel: "loud" } }))
        .body.ok,
    ).toBe(false);
    const badModel = await rpc("sessions.patch", {
      sessionKey: "agent:main:patchme",
      patch: { model: "nope/x" },
    });
    expect(badModel.body.ok).toBe(false);
  });

  it("sessions.list bounds its params as sessions_list does (SEMANTICS §3)", async () => {
    await rpc("chat.send", { sessionKey: "agent:main:bounds-a", message: "one", timeoutSeconds: 20 });
    await rpc("chat.send", { sessionKey: "agent:main:bounds-b", message: "two", timeoutSeconds: 20 });
    // limit is clamped to 1..200 (decimals floored), not refused
    const zero = await rpc("sessions.list", { limit: 0 });
    expect(zero.body.ok).toBe(true);
    expect(zero.body.result.sessions).toHaveLength(1);
    const frac = await rpc("sessions.list", { limit: 1.7 });
    expect(frac.body.result.sessions).toHaveLength(1);
    expect((await rpc("sessions.list", { limit: 10_000 })).body.ok).toBe(true);
    // messageLimit is 0..20: more is clamped to 20
    const many = await rpc("sessions.list", { search: "bounds-a", messageLimit: 50 });
    expect(many.body.ok).toBe(true);
    expect(many.body.result.sessions[0].messages).toHaveLength(2);
    // kinds compare case-insensitively; unknown kinds are ignored
    const kinds = await rpc("sessions.list", { search: "bounds-", kinds: ["MAIN", "bogus"] });
    expect(kinds.body.result.sessions).toEqual([]);
    const other = await rpc("sessions.list", { search: "bounds-", kinds: [" Other "] });
    expect(other.body.result.sessions).toHaveLength(2);
    // negative numbers stay input errors naming the field
    const neg = await rpc("sessions.list", { limit: -1 });
    expect(neg.body.error).toMatchObject({ code: "INVALID_PARAMS" });
    expect(neg.body.error.message).toContain("limit");
  });

  it("sessions.delete removes the session", async () => {
    await rpc("chat.send", { sessionKey: "agent:main:gone", message: "x", timeoutSeconds: 20 });
    expect((await rpc("sessions.delete", { sessionKey: "agent:main:gone" })).body.result).toEqual({
      deleted: true,
    });
    expect((await rpc("sessions.history", { sessionKey: "agent:main:gone" })).body.error.code).toBe(
      "NOT_FOUND",
    );
  });
});

describe("WebSocket", () => {
  it("carries the same frames plus events", async () => {
    const ws = new WebSocket(`${base.replace("http", "ws")}/ws?token=${app.token}`);
    const frames: Array<Record<string, unknown>> = [];
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    ws.on("message", (d) => frames.push(JSON.parse(d.toString())));
    ws.send(
      JSON.stringify({
        id: "a",
        method: "chat.send",
        params: { sessionKey: "agent:main:ws", message: "over ws", timeoutSeconds: 20 },
      }),
    );
    const reply = await eventually(() => frames.find((x) => x.id === "a"), 500);
    expect(reply).toMatchObject({ ok: true, result: { status: "ok" } });
    const events = frames.map((f) => f.event).filter(Boolean);
    expect(events).toEqual(
      expect.arrayContaining(["session.updated", "message.appended", "run.started", "run.finished"]),
    );
    // The data shapes docs/api.md names for each event.
    const result = (reply as { result: { runId: string; reply: string } }).result;
    const data = (name: string) =>
      frames.filter((f) => f.event === name).map((f) => f.data as Record<string, any>);
    const finished = await eventually(() => data("run.finished").find((d) => d.run?.runId === result.runId));
    expect(finished.run).toMatchObject({ sessionKey: "agent:main:ws", status: "ok", reply: result.reply });
    expect(data("run.started").some((d) => d.run?.runId === result.runId)).toBe(true);
    expect(data("session.updated").some((d) => d.entry?.key === "agent:main:ws")).toBe(true);
    expect(data("message.appended").find((d) => d.message?.role === "user")).toMatchObject({
      sessionKey: "agent:main:ws",
      message: { content: "over ws" },
    });
    const deltas = data("run.delta").filter((d) => d.runId === result.runId);
    expect(deltas.map((d) => d.text).join("")).toBe(result.reply);
    expect(data("run.typing").find((d) => d.runId === result.runId)).toMatchObject({
      sessionKey: "agent:main:ws",
      on: true,
    });
    ws.send("not json");
    const bad = await eventually(() => frames.find((f) => f.id === null));
    expect(bad.error).toMatchObject({ code: "INVALID_PARAMS" });
    ws.close();
  });
});

describe("landing page", () => {
  it("without the web chat, / says how to talk to the gateway", async () => {
    const t = tempDir();
    const config = parseConfig({
      stateDir: t.dir,
      gateway: { port: 0 },
      channels: { webchat: { enabled: false } },
    });
    const plain = await createApp(
      { config, source: null, baseDir: t.dir },
      { logger: silentLogger(), role: "gateway" },
    );
    await plain.start();
    try {
      const html = await (await fetch(`http://127.0.0.1:${plain.address?.port}/`)).text();
      expect(html).toContain("chat.send");
      expect(html).toContain("switchboard send");
    } finally {
      await plain.stop();
      t.cleanup();
    }
  });
});

describe("auth", () => {
  it("401 without a valid token when one is configured; loopback-only without a token", async () => {
    const t = tempDir();
    const config = parseConfig({
      stateDir: t.dir,
      gateway: { port: 0, auth: { token: "s3cret-token-123" } },
    });
    const secured = await createApp(
      { config, source: null, baseDir: t.dir },
      { logger: silentLogger(), role: "gateway" },
    );
    await secured.start();
    const url = `http://127.0.0.1:${secured.address?.port}/rpc`;
    try {
      const call = (auth?: string) =>
        fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", ...(auth ? { authorization: auth } : {}) },
          body: JSON.stringify({ method: "health" }),
        });
      expect((await call()).status).toBe(401);
      expect((await call("Bearer wrong")).status).toBe(401);
      const ok = await call("Bearer s3cret-token-123");
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as { ok: boolean }).ok).toBe(true);
    } finally {
      await secured.stop();
      t.cleanup();
    }
    const t2 = tempDir();
    await expect(
      createApp(
        {
          config: parseConfig({ stateDir: t2.dir, gateway: { host: "0.0.0.0", port: 0 } }),
          source: null,
          baseDir: t2.dir,
        },
        { logger: silentLogger(), role: "gateway" },
      ),
    ).rejects.toThrow(/gateway.auth.token/);
    t2.cleanup();
  });
});
