import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postMedia, startTestApp, type TestApp } from "../harness.js";

/**
 * `POST /media` and `GET /media/<id>` (API.md §8.1) on a listening gateway, and `chat.send` with
 * `attachments`: the user line holds the parts (ids and metadata), never the bytes.
 */

const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5d8b6d10000000049454e44ae426082",
  "hex",
);

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ channels: { webchat: { mediaMaxMb: 0.01 } } }, { listen: true });
});
afterAll(async () => {
  await t?.stop();
});

const upload = (bytes: Buffer, name: string, type: string, auth = true) =>
  postMedia(t, bytes, name, type, auth);

async function rpc(method: string, params: Record<string, unknown>) {
  const r = await fetch(`${t.url}/rpc`, {
    method: "POST",
    headers: t.headers(),
    body: JSON.stringify({ id: 1, method, params }),
  });
  return (await r.json()) as { ok: boolean; result?: any; error?: { code: string; message: string } };
}

describe("media over HTTP", () => {
  it("POST /media stores the upload with its sniffed type; GET serves it back with that type", async () => {
    const res = await upload(PNG, "lies.txt", "text/plain");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { mediaId: string; mimeType: string; bytes: number };
    expect(body).toEqual({
      mediaId: `sha256:${createHash("sha256").update(PNG).digest("hex")}`,
      mimeType: "image/png",
      bytes: PNG.length,
    });
    const got = await fetch(`${t.url}/media/${body.mediaId}`, {
      headers: { authorization: `Bearer ${t.token}` },
    });
    expect(got.status).toBe(200);
    expect(got.headers.get("content-type")).toBe("image/png");
    expect(got.headers.get("x-content-type-options")).toBe("nosniff");
    expect(Buffer.from(await got.arrayBuffer())).toEqual(PNG);
    // The web chat's <img src> carries the token in the query.
    expect((await fetch(`${t.url}/media/${body.mediaId}?token=${t.token}`)).status).toBe(200);
  });

  it("401 without auth, 404 for an unknown or malformed id, 413 past channels.webchat.mediaMaxMb", async () => {
    expect((await upload(PNG, "a.png", "image/png", false)).status).toBe(401);
    expect((await fetch(`${t.url}/media/sha256:${"a".repeat(64)}`)).status).toBe(401);
    const h = { authorization: `Bearer ${t.token}` };
    expect((await fetch(`${t.url}/media/sha256:${"a".repeat(64)}`, { headers: h })).status).toBe(404);
    expect((await fetch(`${t.url}/media/..%2F..%2Fetc%2Fpasswd`, { headers: h })).status).toBe(404);
    const big = await upload(Buffer.alloc(20_000, 1), "big.bin", "application/octet-stream");
    expect(big.status).toBe(413);
    const none = await fetch(`${t.url}/media`, { method: "POST", headers: t.headers(), body: "{}" });
    expect(none.status).toBe(415);
  });

  it("chat.send with attachments writes the parts into the user line; history shows ids, never bytes", async () => {
    const { mediaId } = (await (await upload(PNG, "cat.png", "image/png")).json()) as { mediaId: string };
    const sent = await rpc("chat.send", {
      sessionKey: "agent:main:media",
      message: "what is this",
      attachments: [{ mediaId }],
      timeoutSeconds: 20,
    });
    expect(sent.ok).toBe(true);
    expect(sent.result.status).toBe("ok");
    const hist = await rpc("sessions.history", { sessionKey: "agent:main:media" });
    const user = hist.result.messages.find((m: { role: string }) => m.role === "user");
    expect(user.content).toEqual([
      { type: "text", text: "what is this" },
      { type: "image", mediaId, mimeType: "image/png", bytes: PNG.length },
    ]);
    expect(JSON.stringify(hist.result)).not.toContain(PNG.toString("base64").slice(0, 20));
    const bad = await rpc("chat.send", {
      sessionKey: "agent:main:media",
      message: "x",
      attachments: [{ mediaId: `sha256:${"b".repeat(64)}` }],
    });
    expect(bad.error?.code).toBe("INVALID_PARAMS");
    expect(bad.error?.message).toMatch(/attachments\[0\]\.mediaId/);
  });
});

describe("inbound parts", () => {
  it("an inbound message's parts reach the user line as the array of parts; the model sees a line per file", async () => {
    const parts = [
      { type: "image" as const, mediaId: `sha256:${"c".repeat(64)}`, mimeType: "image/jpeg", bytes: 2048 },
      {
        type: "media_note" as const,
        name: "huge.mov",
        mimeType: "video/quicktime",
        bytes: 9e8,
        reason: "too_large" as const,
      },
    ];
    const r = await t.app.router.handle({
      channel: "webchat",
      accountId: "default",
      chatType: "direct",
      peerId: "visitor-1",
      senderId: "visitor-1",
      text: "look",
      messageId: "m-media-1",
      wasMentioned: false,
      replyToBot: false,
      media: [],
      parts,
    });
    expect(r.accepted).toBe(true);
    const run = await t.app.services.pipeline.wait(r.runId as string, 10_000);
    expect(run?.status).toBe("ok");
    const hist = await rpc("sessions.history", { sessionKey: r.sessionKey as string });
    const user = hist.result.messages.find((m: { role: string }) => m.role === "user");
    expect(user.content).toEqual([{ type: "text", text: "look" }, ...parts]);
  });
});
