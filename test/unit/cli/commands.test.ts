import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type App, createApp } from "../../../src/app/index.js";
import { banner, formatLine, generatedToken } from "../../../src/cli/banner.js";
import { main } from "../../../src/cli/main.js";
import { loadConfig } from "../../../src/config/load.js";
import { silentLogger } from "../../../src/log.js";
import { resumeMessage } from "../../../src/pipeline/local/index.js";
import { tempDir } from "../../helpers.js";

/** The CLI as a well-kept CLI (issue 14, item 7), run in-process against a real gateway. */

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await main(argv, {
    out: (s) => (out += s.endsWith("\n") ? s : `${s}\n`),
    err: (s) => (err += `${s}\n`),
  });
  return { code, out, err };
}

const VERSION = (
  JSON.parse(readFileSync(path.resolve(import.meta.dirname, "../../../package.json"), "utf8")) as {
    version: string;
  }
).version;

describe("flags and help", () => {
  it("--version prints the package version", async () => {
    const r = await cli("--version");
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe(VERSION);
  });

  it("an unknown --kinds value is an error listing the valid kinds, before any call", async () => {
    const r = await cli("sessions", "list", "--kinds", "main,mian", "--url", "http://127.0.0.1:9");
    expect(r.code).not.toBe(0);
    expect(r.err).toContain('--kinds: unknown kind "mian"');
    expect(r.err).toContain("main, group, cron, hook, node, other");
    expect(r.err).not.toContain("cannot reach");
  });

  it("flag errors name the flag, not the RPC parameter", async () => {
    const r = await cli("sessions", "list", "--active", "abc", "--url", "http://127.0.0.1:9");
    expect(r.code).not.toBe(0);
    expect(r.err).toContain("--active");
    expect(r.err).not.toContain("activeMinutes");
    const l = await cli("sessions", "history", "main", "--limit", "-3", "--url", "http://127.0.0.1:9");
    expect(l.err).toContain("--limit");
    const t = await cli("send", "main", "hi", "--timeout", "soon", "--url", "http://127.0.0.1:9");
    expect(t.err).toContain("--timeout");
    // Values the gateway would refuse are refused here, naming the flag (before any call).
    for (const argv of [
      ["sessions", "list", "--active", "0"],
      ["send", "main", "hi", "--timeout", "3601"],
      ["runs", "wait", "some-run", "--timeout", "3601"],
    ]) {
      const r = await cli(...argv, "--url", "http://127.0.0.1:9");
      expect(r.code).not.toBe(0);
      expect(r.err).toContain(`${argv[argv.length - 2]}: must be`);
      expect(r.err).not.toContain("cannot reach");
    }
  });

  it("mcp --help shows its default once", async () => {
    const r = await cli("mcp", "--help");
    expect(r.out.match(/main/g)?.length).toBe(1);
  });

  it("health is listed and documented", async () => {
    const r = await cli("--help");
    expect(r.out).toMatch(/health\s/);
    expect(readFileSync(path.resolve(import.meta.dirname, "../../../docs/api.md"), "utf8")).toContain(
      "switchboard health",
    );
  });
});

describe("against a running gateway", () => {
  const t = tempDir();
  let app: App;
  let url: string;
  const saved = process.env.OPENAI_API_KEY;
  beforeAll(async () => {
    const file = path.join(t.dir, "switchboard.json5");
    writeFileSync(
      file,
      JSON.stringify({
        stateDir: path.join(t.dir, "state"),
        session: {
          sendPolicy: { rules: [{ match: { keyPrefix: "agent:main:blocked" }, action: "deny" }] },
        },
        models: {
          default: "rules/cli",
          providers: {
            rules: {
              kind: "scripted",
              rules: [
                { match: { exact: "slow" }, reply: "late reply", delayMs: 2500 },
                {
                  match: { exact: "list sessions" },
                  toolCalls: [{ name: "sessions_list", args: {} }],
                  afterTools: "listed",
                },
                { match: { exact: "help" }, reply: "the help text" },
              ],
            },
          },
        },
      }),
    );
    app = await createApp(loadConfig({ file }), { logger: silentLogger(), role: "gateway", port: 0 });
    await app.start();
    url = `http://127.0.0.1:${app.address?.port}`;
  });
  afterAll(async () => {
    await app.stop();
    if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
    t.cleanup();
  });

  it("sessions list prints a header and shows the main session as `main`", async () => {
    expect((await cli("send", "main", "hello", "--url", url, "--token", app.token ?? "")).code).toBe(0);
    const r = await cli("sessions", "list", "--url", url, "--token", app.token ?? "");
    expect(r.code).toBe(0);
    const [header, ...rows] = r.out.trim().split("\n");
    expect(header).toMatch(/^UPDATED\s+KIND\s+CHANNEL\s+KEY/);
    expect(rows.some((row) => /\smain\s*$/.test(row) || /\smain\s{2}/.test(row))).toBe(true);
    expect(r.out).not.toContain("agent:main:main");
    const json = await cli("sessions", "list", "--url", url, "--token", app.token ?? "", "--json");
    expect(JSON.parse(json.out).sessions[0].key).toBe("agent:main:main");
  });

  it("history --tools names the tool of each call and result", async () => {
    expect((await cli("send", "main", "list sessions", "--url", url, "--token", app.token ?? "")).code).toBe(
      0,
    );
    const r = await cli("sessions", "history", "main", "--tools", "--url", url, "--token", app.token ?? "");
    expect(r.out).toMatch(/toolCall sessions_list: /);
    expect(r.out).toMatch(/toolResult sessions_list: /);
    const plain = await cli("sessions", "history", "main", "--url", url, "--token", app.token ?? "");
    expect(plain.out).not.toContain("toolCall");
  });

  it("runs wait prints the reply as text (and --json the result)", async () => {
    const sent = await cli(
      "send",
      "main",
      "help",
      "--timeout",
      "0",
      "--url",
      url,
      "--token",
      app.token ?? "",
    );
    const runId = /accepted: run (\S+)/.exec(sent.out)?.[1];
    expect(runId).toBeDefined();
    const r = await cli(
      "runs",
      "wait",
      String(runId),
      "--timeout",
      "10",
      "--url",
      url,
      "--token",
      app.token ?? "",
    );
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe("the help text");
    const j = await cli("runs", "wait", String(runId), "--url", url, "--token", app.token ?? "", "--json");
    expect(JSON.parse(j.out)).toMatchObject({ runId, status: "ok" });
  });

  it("send --timeout prints the run id once and the command that waits for it", async () => {
    const r = await cli("send", "main", "slow", "--timeout", "1", "--url", url, "--token", app.token ?? "");
    expect(r.code).toBe(2);
    const runId = /switchboard runs wait (\S+)/.exec(r.err)?.[1];
    expect(runId).toBeDefined();
    expect(r.err.split(String(runId)).length - 1).toBe(1);
    expect(r.err).not.toContain("agent.wait");
    const w = await cli(
      "runs",
      "wait",
      String(runId),
      "--timeout",
      "10",
      "--url",
      url,
      "--token",
      app.token ?? "",
    );
    expect(w.out.trim()).toBe("late reply");
  });

  it("send --json keeps the exit code: 2 on a timeout, 1 on an error (API.md §2)", async () => {
    const auth = ["--url", url, "--token", app.token ?? ""];
    const slow = await cli("send", "main", "slow", "--timeout", "1", "--json", ...auth);
    expect(JSON.parse(slow.out)).toMatchObject({ status: "timeout" });
    expect(slow.code).toBe(2);
    const denied = await cli("send", "agent:main:blocked", "hi", "--json", ...auth);
    expect(JSON.parse(denied.out)).toMatchObject({ status: "error" });
    expect(denied.code).toBe(1);
    const text = await cli("send", "agent:main:blocked", "hi", ...auth);
    expect(text.code).toBe(1);
    expect(text.err).toContain("send blocked by session policy");
    expect(text.err).not.toContain("undefined");
    const ok = await cli("send", "main", "help", "--json", ...auth);
    expect(JSON.parse(ok.out)).toMatchObject({ status: "ok", reply: "the help text" });
    expect(ok.code).toBe(0);
  });

  it("health prints text with the version, and --json the RPC result", async () => {
    const r = await cli("health", "--url", url, "--token", app.token ?? "");
    expect(r.out).toContain(`switchboard ${VERSION}`);
    expect(r.out).toMatch(/storage\s+fs/);
    // the transcript tail cache: what it holds of its budget, and how often it went to the disk
    expect(r.out).toMatch(
      /cache\s+\d+ transcripts, [\d.]+ of 12 M chars; [\d,]+ reads from memory, [\d,]+ tails loaded/,
    );
    expect(
      JSON.parse((await cli("health", "--url", url, "--token", app.token ?? "", "--json")).out).version,
    ).toBe(VERSION);
  });

  it("with no gateway, the main session reads as empty before anyone chatted, like the gateway answers", async () => {
    const file = path.join(t.dir, "fresh.json5");
    writeFileSync(file, JSON.stringify({ stateDir: path.join(t.dir, "fresh-state"), gateway: { port: 9 } }));
    const r = await cli("sessions", "history", "main", "--json", "--config", file);
    expect(r.err).toContain("reading the local store");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({
      sessionKey: "agent:main:main",
      messages: [],
      truncated: false,
    });
    const text = await cli("sessions", "history", "main", "--config", file);
    expect(text.out).toContain("no messages in main");
    // Only the main session of a configured agent: other missing sessions are still not found.
    for (const key of ["agent:main:telegram:direct:1", "agent:ghost:main"]) {
      const missing = await cli("sessions", "history", key, "--config", file);
      expect(missing.code).toBe(1);
      expect(missing.err).toContain(`NOT_FOUND: session not found: ${key}`);
    }
  });

  it("a read-only command needs no model key", async () => {
    delete process.env.OPENAI_API_KEY;
    const file = path.join(t.dir, "with-key.json5");
    writeFileSync(
      file,
      `{ stateDir: ${JSON.stringify(path.join(t.dir, "other-state"))}, gateway: { port: 9 },
         models: { default: "openai/gpt-4.1-mini", providers: { openai: { kind: "openai", apiKey: "\${OPENAI_API_KEY}" } } } }`,
    );
    // No gateway answers on port 9: the command reads the local store, with the key still unset.
    const r = await cli("sessions", "list", "--config", file);
    expect(r.err).not.toContain("OPENAI_API_KEY");
    expect(r.code).toBe(0);
    expect(r.out).toContain("no sessions");
  });
});

describe("health with a WhatsApp account waiting to be linked", () => {
  it("draws the QR code in the terminal and names no other site", async () => {
    const server = createServer((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          id: 1,
          ok: true,
          result: {
            ok: true,
            version: VERSION,
            storage: "fs",
            queue: "local",
            model: "scripted/demo",
            channels: { whatsapp: "needs-login" },
            accounts: { "whatsapp:default": "needs-login" },
            channelDetails: {
              "whatsapp:default": { state: "needs-login", detail: "2@SECRET,xyz", qr: "2@SECRET,xyz" },
            },
          },
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const r = await cli("health", "--url", `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    await new Promise<void>((r) => server.close(() => r()));
    expect(r.out).toContain("whatsapp:default needs-login");
    expect(r.out).toMatch(/[█▀▄]{4}/);
    expect(r.out).toContain("Linked devices");
    expect(r.out).not.toContain("2@SECRET");
    expect(r.out).not.toMatch(/generator|https?:\/\/(?!127\.0\.0\.1)/i);
  });
});

describe("the first screen", () => {
  const facts = {
    version: "1.2.3",
    role: "gateway" as const,
    url: "http://127.0.0.1:18790",
    webchat: true,
    generatedToken: null,
    tokenConfigured: false,
    storage: "fs at /tmp/x",
    queue: "local (in-process, journaled)",
    model: "openai/gpt-4.1-mini",
    config: null,
  };

  it("names version, web chat, dashboard, storage, queue, model and how to stop, in 80 columns", () => {
    const text = banner(facts);
    for (const s of [
      "1.2.3",
      "http://127.0.0.1:18790/",
      "/dashboard",
      "fs at /tmp/x",
      "local",
      "gpt-4.1-mini",
      "Ctrl-C to stop",
    ])
      expect(text).toContain(s);
    for (const line of text.split("\n")) expect(line.length).toBeLessThanOrEqual(80);
    expect(text).not.toContain("{");
  });

  it("puts a token generated into the state dir into the URLs, never a configured one", () => {
    const t = tempDir();
    writeFileSync(path.join(t.dir, "gateway.token"), "abc123token\n");
    expect(generatedToken(t.dir, undefined)).toBe("abc123token");
    expect(generatedToken(t.dir, "configured-token")).toBeNull();
    const text = banner({ ...facts, generatedToken: "abc123token" });
    expect(text).toContain("http://127.0.0.1:18790/#token=abc123token");
    expect(text).toContain("http://127.0.0.1:18790/dashboard#token=abc123token");
    t.cleanup();
  });
});

describe("words, not counters", () => {
  it("the restart message says what was resumed and what is merely scheduled", () => {
    expect(resumeMessage(0, { archive: 7 })).toBe(
      "local pipeline: no unfinished turns to resume; 7 follow-up jobs still scheduled (7 archive)",
    );
    expect(resumeMessage(1, {})).toBe("local pipeline: resuming 1 turn accepted before the restart");
  });

  it("terminal log lines are short: time, level when not info, message", () => {
    const line = formatLine(
      JSON.stringify({ level: 40, time: 0, msg: "redis slow", err: { message: "ETIMEDOUT" } }),
    );
    expect(line).toMatch(/^\d\d:\d\d:\d\d WARN redis slow \(ETIMEDOUT\)\n$/);
  });
});
