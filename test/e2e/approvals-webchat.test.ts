import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApprovalsDriver, startApprovalsApp, userMessages } from "../approvals-fixture.js";
import type { TestApp } from "../harness.js";
import { eventually } from "../helpers.js";
import { describeRedis } from "../redis.js";
import { openWebchat } from "./web.js";

/**
 * Approvals in the web chat (API.md §8.3): the request arrives with three buttons, a press is an
 * `action` frame answered by a `notice`, the request is then re-sent without buttons saying who
 * decided, and the run goes on. A forged press (another message, an unknown button) runs nothing.
 * On both drivers: on bullmq the turn waits on a worker while the press lands on the gateway.
 */

function approvalsInWebchat(driver: ApprovalsDriver): void {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    t = await startApprovalsApp({}, { listen: true, driver });
    base = `http://127.0.0.1:${t.app.address?.port}`;
  }, 30_000);
  afterAll(async () => t?.stop());

  const open = (visitor: string) => openWebchat(base, t.token, visitor);

  it("buttons, a press, the notice, the edited request, the run resumed", { timeout: 30_000 }, async () => {
    const c = open("visitor-ap01");
    await c.ready;
    c.ws.send(JSON.stringify({ type: "message", id: "1", text: "ping web" }));
    const request = await eventually(() => c.frames.find((f) => f.type === "message" && f.actions), 500, 20);
    expect(request.text).toContain("Approval needed");
    const ids = request.actions.map((a: { id: string }) => a.id);
    expect(ids).toHaveLength(3);
    expect(request.actions.map((a: { label: string }) => a.label)).toEqual([
      "Allow once",
      "Allow always",
      "Deny",
    ]);

    // forged presses: an unknown message, an unknown button
    c.ws.send(JSON.stringify({ type: "action", messageId: "not-a-message", actionId: ids[0] }));
    c.ws.send(
      JSON.stringify({ type: "action", messageId: request.id, actionId: "ap:ap_00000000000000000000:once" }),
    );
    c.ws.send(JSON.stringify({ type: "action", messageId: request.id, actionId: "" }));
    await eventually(() => c.frames.filter((f) => f.type === "notice").length >= 2, 200, 20);
    expect(c.frames.filter((f) => f.type === "notice").map((f) => f.text)).toEqual([
      expect.stringMatching(/Refused/),
      expect.stringMatching(/Refused: this request is unknown/),
    ]);
    expect(c.frames.some((f) => f.type === "error" && f.code === "INVALID_PARAMS")).toBe(true);
    expect((await t.rpc("approvals.list", {})).result.approvals).toHaveLength(1);

    c.ws.send(JSON.stringify({ type: "action", messageId: request.id, actionId: ids[0] }));
    const ok = await eventually(
      () => c.frames.find((f) => f.type === "notice" && f.text === "Allowed once."),
      500,
      20,
    );
    expect(ok.id).toBe(request.id);
    const edited = await eventually(
      () =>
        c.frames.find(
          (f) =>
            f.type === "message" && f.id === request.id && Array.isArray(f.actions) && f.actions.length === 0,
        ),
      500,
      20,
    );
    expect(edited.text).toContain("Allowed once by webchat:visitor-ap01");
    // a second press is refused
    c.ws.send(JSON.stringify({ type: "action", messageId: request.id, actionId: ids[2] }));
    await eventually(
      () => c.frames.find((f) => f.type === "notice" && /already decided/.test(f.text)),
      500,
      20,
    );
    const reply = await eventually(
      () => c.frames.find((f) => f.type === "message" && String(f.text).startsWith("done:")),
      500,
      20,
    );
    expect(reply.text).toContain("done:");
    // the a2a reply-back turns that follow the send may land on the target meanwhile
    expect((await userMessages(t.rpc)).filter((c) => c === "web")).toEqual(["web"]);
    c.ws.close();
  });
}

describe("approvals in the web chat (fs store, local queue)", () => approvalsInWebchat("local"));
describeRedis("approvals in the web chat (redis, bullmq: a worker runs the turn)", () =>
  approvalsInWebchat("bullmq"),
);
