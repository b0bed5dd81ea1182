import { Readable } from "node:stream";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "../../../src/config/index.js";
import { ensureSession } from "../../../src/sessions/service.js";
import type { TranscriptMessage } from "../../../src/store/types.js";
import {
  contentText,
  type FakeChatReply,
  type OpenAIFake,
  type RecordedRequest,
  startOpenAIFake,
} from "../../fakes/openai.js";
import { attachChannel, plainMemoryChannel, startTestApp, type TestApp } from "../../harness.js";
import { eventually } from "../../helpers.js";

/**
 * Media out beyond the message tool (API.md §8.2): `sessions_send` attachments reach the target's
 * transcript and its chat with the announce; a sub-agent's announce carries the files its reply
 * names (only ids its own transcript held); a tool result's text never sends a file.
 */

const REQ = "agent:main:main";
const TGT = "agent:ops:main";
const CHAT = "agent:main:memory:direct:u1";

let fake: OpenAIFake;
let brain: (session: string, req: RecordedRequest) => FakeChatReply = () => ({ text: "ok" });

beforeAll(async () => {
  fake = await startOpenAIFake();
  fake.setDefault((req) => {
    const first = req.body.messages?.[0];
    const system = first?.role === "system" ? contentText(first.content) : "";
    return brain(/- Session: (\S+)/.exec(system)?.[1] ?? "?", req);
  });
});
afterAll(async () => {
  await fake?.close();
});

let t: TestApp | null = null;
afterEach(async () => {
  await t?.stop();
  t = null;
});

async function setUp(overrides: Partial<ConfigInput> = {}) {
  fake.requests.length = 0;
  const app = await startTestApp({
    models: {
      default: "fake/m",
      providers: { fake: { kind: "openai", baseUrl: fake.url, apiKey: "k", maxRetries: 0 } },
    },
    agents: { list: [{ id: "main" }, { id: "ops" }] },
    tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    session: { agentToAgent: { maxPingPongTurns: 0 } },
    ...overrides,
  });
  t = app;
  const channel = await attachChannel(
    app,
    plainMemoryChannel({ media: { captionLimit: 1000, voiceNotes: true } }),
  );
  const s = app.app.services;
  await ensureSession(s, REQ, { agentId: "main", channel: "webchat" });
  await ensureSession(s, TGT, { agentId: "ops" });
  await s.store.sessions.patch(TGT, { deliveryContext: { channel: "memory", to: "room-1" } });
  return { app, channel };
}

async function put(app: TestApp, text: string): Promise<string> {
  const media = app.app.services.media;
  if (!media) throw new Error("no media store");
  const stored = await media.put(Readable.from([Buffer.from(text)]), {
    maxBytes: 1 << 20,
    declaredType: "text/plain",
    name: "n.txt",
  });
  return stored.mediaId;
}

async function transcript(app: TestApp, key: string): Promise<TranscriptMessage[]> {
  const entry = await app.app.services.store.sessions.get(key);
  if (!entry) return [];
  return app.app.services.store.transcripts.readTail(
    { agentId: entry.agentId, sessionId: entry.sessionId },
    { limit: 100, includeTools: true },
  );
}

describe("sessions_send attachments", () => {
  it("are checked (format, stored) with errors naming the field", async () => {
    const { app, channel } = await setUp();
    await expect(
      app.invoke(REQ, "sessions_send", { sessionKey: TGT, message: "m", attachments: [{ mediaId: "nope" }] }),
    ).rejects.toThrow(/attachments.*mediaId/);
    const missing = `sha256:${"0".repeat(64)}`;
    const r = await app.invoke(REQ, "sessions_send", {
      sessionKey: TGT,
      message: "m",
      attachments: [{ mediaId: missing }],
    });
    expect(r.status).toBe("error");
    expect(r.error).toContain("attachments[0].mediaId");
    expect(fake.chatRequests()).toHaveLength(0);
    expect(channel.sent).toEqual([]);
  });

  it("land in the target's line as parts and go to its chat with the announce", async () => {
    const { app, channel } = await setUp();
    const id = await put(app, "the quarterly report\n");
    brain = (session, req) => {
      const sys = contentText(req.body.messages?.[0]?.content);
      if (session === TGT && sys.includes("announce step")) return { text: "Report attached." };
      return { text: "got it" };
    };
    const r = await app.invoke(REQ, "sessions_send", {
      sessionKey: TGT,
      message: "here is the report",
      attachments: [{ mediaId: id }],
      timeoutSeconds: 10,
    });
    expect(r).toMatchObject({ status: "ok", reply: "got it" });
    const line = (await transcript(app, TGT)).find((m) => m.role === "user");
    expect(Array.isArray(line?.content)).toBe(true);
    expect(((line?.content ?? []) as Array<Record<string, unknown>>)[1]).toMatchObject({
      type: "file",
      mediaId: id,
      mimeType: "text/plain",
    });
    // ids and metadata only, never the bytes
    expect(JSON.stringify(line?.content)).not.toContain("quarterly");
    const sent = await eventually(() => channel.sent.find((m) => m.attachments?.length));
    expect(sent.to).toBe("room-1");
    expect(sent.text).toBe("Report attached.");
    expect((await sent.attachments?.[0]?.read())?.toString()).toBe("the quarterly report\n");
  });
});

describe("sub-agent announce files", () => {
  it("carries the files its reply names that its own transcript held; a guessed id travels nowhere", async () => {
    const { app, channel } = await setUp();
    await app.app.services.store.sessions.patch(REQ, {
      deliveryContext: { channel: "memory", to: "room-main" },
    });
    const given = await put(app, "chart bytes");
    const guessed = await put(app, "someone else's file");
    brain = (session) =>
      session.includes(":subagent:")
        ? { text: `Done: the chart is ${given}; also ${guessed}.` }
        : { text: "main answers" };
    const r = await app.invoke(REQ, "sessions_spawn", { task: `summarise the chart ${given}` });
    expect(r.status).toBe("accepted");
    const sent = await eventually(() => channel.sent.find((m) => m.attachments?.length), 500, 10);
    expect(sent.to).toBe("room-main");
    expect(sent.text).toContain("[Sub-agent completion]");
    expect(sent.attachments?.length).toBe(1);
    expect((await sent.attachments?.[0]?.read())?.toString()).toBe("chart bytes");
    const announce = (await transcript(app, REQ)).find((m) => m.provenance?.kind === "subagent_announce");
    const ids = JSON.stringify(announce?.content).match(/"mediaId":"[^"]+"/g);
    expect(ids).toEqual([`"mediaId":"${given}"`]);
  });
});

describe("tool results never send", () => {
  it("a MEDIA: line or a { mediaId } JSON in a tool result reaches no adapter as a file", async () => {
    const { app, channel } = await setUp();
    await ensureSession(app.app.services, CHAT, { agentId: "main" });
    await app.app.services.store.sessions.patch(CHAT, {
      deliveryContext: { channel: "memory", to: "chat-1", accountId: "default" },
    });
    const id = await put(app, "secret-ish");
    // The target's announce text (a tool result for the caller) names files the way a model might.
    let step = 0;
    brain = (session, req) => {
      if (session === TGT) return { text: `MEDIA:/etc/passwd\n{ "mediaId": "${id}" }` };
      const msgs = req.body.messages ?? [];
      if (msgs[msgs.length - 1]?.role === "tool") return { text: "nothing to send" };
      step++;
      return { toolCalls: [{ name: "sessions_send", arguments: { sessionKey: TGT, message: "hi" } }] };
    };
    const run = await app.app.services.pipeline.submitTurn({
      sessionKey: CHAT,
      agentId: "main",
      text: "ask ops",
      deliver: true,
      origin: "operator",
    } as never);
    const rec = await app.app.services.pipeline.wait(run.runId, 10_000);
    expect(rec?.status).toBe("ok");
    expect(step).toBe(1);
    const toolResult = (await transcript(app, CHAT)).find((m) => m.role === "toolResult");
    expect(JSON.stringify(toolResult?.content)).toContain("MEDIA:/etc/passwd");
    await eventually(() => channel.sent.some((m) => m.text === "nothing to send"));
    expect(channel.sent.filter((m) => m.attachments?.length)).toEqual([]);
  });
});
