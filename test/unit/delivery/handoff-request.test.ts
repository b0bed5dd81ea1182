import { describe, expect, it } from "vitest";
import { parseHandoffRequest } from "../../../src/delivery/handoff-bullmq.js";
import type { DeliveryRequest } from "../../../src/services/index.js";

/**
 * A handed-off request crosses Redis as JSON and is parsed back on a gateway: every field of
 * `DeliveryRequest` must come back as it went (a hand-copied field list once dropped attachments
 * and buttons); the build checks the schema names every field, this checks the values survive.
 */
describe("parseHandoffRequest", () => {
  it("returns a request with every field exactly as it was queued", () => {
    const req: Required<DeliveryRequest> = {
      sessionKey: "agent:main:x",
      text: "hello",
      idempotencyKey: "reply:r1#0",
      route: { channel: "telegram", to: "42", accountId: "default", threadId: "7" },
      bypassPolicy: true,
      kind: "failure",
      actions: [
        { id: "ap:1:once", label: "Allow once", style: "success" },
        { id: "ap:1:deny", label: "Deny" },
      ],
      actionsFallback: "Reply 1 or 3",
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      attachments: [{ mediaId: "sha256:ab", name: "a.png", voice: false }, { mediaId: "sha256:cd" }],
    };
    const back = parseHandoffRequest(JSON.parse(JSON.stringify(req)));
    expect(back).toStrictEqual(req);
    const minimal = { sessionKey: "s", text: "", idempotencyKey: "k" };
    expect(parseHandoffRequest(JSON.parse(JSON.stringify(minimal)))).toStrictEqual(minimal);
  });

  it("refuses malformed data instead of posting it", () => {
    expect(parseHandoffRequest({ sessionKey: "s", text: "t" })).toBeNull();
    expect(
      parseHandoffRequest({ sessionKey: "s", text: "t", idempotencyKey: "k", kind: "other" }),
    ).toBeNull();
  });
});
