import { EventEmitter } from "node:events";
import { expect, it } from "vitest";
import { createWebchatChannel, type WebchatSocket } from "../../channels/webchat/index.js";
import type { WebchatHistoryItem } from "../../channels/webchat/types.js";
import { silentLogger } from "../../src/log.js";

/**
 * A page reloaded while a reply streams (or after its last delta, before the transcript holds it)
 * still shows that reply: the adapter sends it whole to the new socket, then only deltas.
 */

class FakeSocket extends EventEmitter implements WebchatSocket {
  readonly OPEN = 1;
  readyState = 1;
  readonly frames: Array<Record<string, unknown>> = [];
  send(data: string): void {
    this.frames.push(JSON.parse(data) as Record<string, unknown>);
  }
  close(): void {
    this.readyState = 3;
    this.emit("close");
  }
}

const VISITOR = "visitor-1234";
const OUT = { accountId: "default", to: VISITOR, format: "native" } as const;
const settle = () => new Promise((r) => setImmediate(r));

it("a socket opened mid-stream gets the reply whole, then its deltas", async () => {
  let history: WebchatHistoryItem[] = [];
  const chat = createWebchatChannel({}, { logger: silentLogger(), history: async () => history });
  await chat.start(async () => undefined);
  const first = new FakeSocket();
  chat.connect(first, VISITOR);
  await settle();
  const { messageIds } = await chat.send({ ...OUT, text: "Here" });
  const id = messageIds[0]!;
  await chat.edit({ ...OUT, messageId: id, text: "Here is" });
  expect(first.frames.at(-1)).toEqual({ type: "delta", id, text: " is" });

  first.close(); // the page reloads
  const second = new FakeSocket();
  chat.connect(second, VISITOR);
  await settle();
  expect(second.frames.map((f) => f.type)).toEqual(["hello", "history", "message"]);
  expect(second.frames.at(-1)).toMatchObject({ type: "message", id, text: "Here is" });
  await chat.edit({ ...OUT, messageId: id, text: "Here is all." });
  expect(second.frames.at(-1)).toEqual({ type: "delta", id, text: " all." });

  // Once the transcript holds the reply, a new page shows it from history only (no copy).
  history = [{ id: "run:s0:a", role: "assistant", text: "Here is all.", at: 1 }];
  const third = new FakeSocket();
  chat.connect(third, VISITOR);
  await settle();
  expect(third.frames.map((f) => f.type)).toEqual(["hello", "history"]);
  await chat.stop();
});

it("a reply sent whole (not streamed) is not re-sent on open", async () => {
  const chat = createWebchatChannel({}, { logger: silentLogger(), history: async () => [] });
  await chat.start(async () => undefined);
  const first = new FakeSocket();
  chat.connect(first, VISITOR);
  await settle();
  await chat.send({ ...OUT, text: "a failure line", kind: "failure" });
  const second = new FakeSocket();
  chat.connect(second, VISITOR);
  await settle();
  expect(second.frames.map((f) => f.type)).toEqual(["hello", "history"]);
  await chat.stop();
});
