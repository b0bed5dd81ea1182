import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type OpenAIFake, startOpenAIFake } from "../fakes/openai.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually } from "../helpers.js";

/**
 * A turn streams its model call only when someone will see the stream: a WebSocket client, a
 * `run.delta` listener in process (a channel showing the reply as it comes is the other case, in
 * test/e2e/liveness.test.ts). With no one watching, the provider is asked for one JSON answer.
 */
let oa: OpenAIFake;
let t: TestApp;

beforeAll(async () => {
  oa = await startOpenAIFake();
  oa.setDefault(() => ({ text: "one two three" }));
  t = await startTestApp(
    {
      models: {
        default: "oa/fake-model",
        providers: { oa: { kind: "openai", baseUrl: oa.url, maxRetries: 0 } },
      },
    },
    { listen: true },
  );
});

afterAll(async () => {
  await t?.stop();
  await oa?.close();
});

async function send(message: string): Promise<{ stream: boolean; reply: string }> {
  const before = oa.chatRequests().length;
  const r = await t.rpc("chat.send", { sessionKey: "agent:main:audience", message });
  expect(r.ok).toBe(true);
  const result = r.result as { status: string; reply: string };
  expect(result.status).toBe("ok");
  const sent = oa.chatRequests().slice(before);
  expect(sent).toHaveLength(1);
  return { stream: sent[0]!.body.stream === true, reply: result.reply };
}

describe("streaming follows its audience", () => {
  it("asks for one JSON answer when no one watches", async () => {
    expect(t.app.services.bus.watched("run.delta", "agent:main:audience")).toBe(false);
    expect(await send("quiet")).toEqual({ stream: false, reply: "one two three" });
  });

  it("streams while a WebSocket client is connected, and stops once it left", async () => {
    const ws = new WebSocket(`${String(t.url).replace("http", "ws")}/ws?token=${t.token}`);
    const deltas: string[] = [];
    ws.on("message", (raw) => {
      const f = JSON.parse(String(raw)) as { event?: string; data?: { text?: string } };
      if (f.event === "run.delta") deltas.push(f.data?.text ?? "");
    });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    await eventually(() => expect(t.app.services.bus.watched("run.delta", "agent:main:audience")).toBe(true));
    const watched = await send("watched");
    expect(watched).toEqual({ stream: true, reply: "one two three" });
    await eventually(() => expect(deltas.join("")).toBe("one two three"));
    ws.close();
    await eventually(() =>
      expect(t.app.services.bus.watched("run.delta", "agent:main:audience")).toBe(false),
    );
    expect((await send("left")).stream).toBe(false);
  });

  it("streams for an in-process run.delta listener", async () => {
    const seen: string[] = [];
    const off = t.app.services.bus.on("run.delta", (d) => seen.push(d.text));
    try {
      expect((await send("listened")).stream).toBe(true);
      expect(seen.join("")).toBe("one two three");
    } finally {
      off();
    }
    expect((await send("after")).stream).toBe(false);
  });
});
