import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { attachChannel, plainMemoryChannel, startTestApp, type TestApp } from "../../harness.js";
import { seedSession } from "./seed-sessions.js";

/** The `message` tool (API.md §8.2): text and files into a chat, workspace paths confined. */

const CHAT = "agent:main:memory:direct:u1";
let t: TestApp | null = null;
afterEach(async () => {
  await t?.stop();
  t = null;
});

async function setUp(media = true) {
  const app = await startTestApp({});
  t = app;
  const ws = path.join(app.dir, "ws");
  mkdirSync(ws, { recursive: true });
  // The agent's workspace is configured after the app started: a copy of config with it set.
  app.app.services.config.agents.list[0] = {
    ...(app.app.services.config.agents.list[0] ?? { id: "main" }),
    workspace: ws,
  } as never;
  const channel = await attachChannel(
    app,
    plainMemoryChannel(media ? { media: { captionLimit: 50, voiceNotes: true } } : {}),
  );
  await seedSession(app, CHAT, {
    deliveryContext: { channel: "memory", to: "chat-1", accountId: "default" },
  });
  return { app, channel, ws };
}

describe("message tool", () => {
  it("sends a workspace file with its caption; the adapter gets the bytes from the store", async () => {
    const { app, channel, ws } = await setUp();
    writeFileSync(path.join(ws, "report.txt"), "quarterly numbers\n");
    const r = await app.invoke(CHAT, "message", {
      text: "here you go",
      attachments: [{ path: "report.txt" }],
    });
    expect(r).toMatchObject({ status: "sent" });
    expect(r.messageIds.length).toBe(1);
    const sent = channel.sent.at(-1);
    expect(sent?.text).toBe("here you go");
    expect(sent?.attachments?.map((a) => [a.kind, a.name, a.mimeType])).toEqual([
      ["file", "report.txt", "text/plain"],
    ]);
    expect((await sent?.attachments?.[0]?.read())?.toString()).toBe("quarterly numbers\n");
  });

  it("refuses paths out of the workspace (.., absolute, a link out) with forbidden, and sends nothing", async () => {
    const { app, channel, ws } = await setUp();
    writeFileSync(path.join(app.dir, "secret.txt"), "s3cr3t");
    symlinkSync(path.join(app.dir, "secret.txt"), path.join(ws, "link.txt"));
    for (const p of ["../secret.txt", path.join(app.dir, "secret.txt"), "link.txt", "sub/../../secret.txt"]) {
      const r = await app.invoke(CHAT, "message", { text: "x", attachments: [{ path: p }] });
      expect(r.status, p).toBe("forbidden");
    }
    expect(channel.sent).toEqual([]);
  });

  it("a long caption goes first as text; text alone is a plain message; a tool result's MEDIA: line sends nothing", async () => {
    const { app, channel, ws } = await setUp();
    writeFileSync(path.join(ws, "a.txt"), "a");
    const long = "y".repeat(80);
    const r = await app.invoke(CHAT, "message", { text: long, attachments: [{ path: "a.txt" }] });
    expect(r.status).toBe("sent");
    expect(channel.sent.map((m) => [m.text, m.attachments?.length ?? 0])).toEqual([
      [long, 0],
      ["", 1],
    ]);
    expect((await app.invoke(CHAT, "message", { text: "just text" })).status).toBe("sent");
    expect(channel.sent.at(-1)?.text).toBe("just text");
    // Text that names a file is only text: nothing but a typed attachment sends a file.
    const before = channel.sent.length;
    await app.invoke(CHAT, "message", { text: "MEDIA:/etc/passwd" });
    expect(channel.sent.length).toBe(before + 1);
    expect(channel.sent.at(-1)?.attachments).toBeUndefined();
  });
});
