import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { chatSendParams, plainChatSend } from "../../../src/gateway/methods/chat.js";
import { method, RpcDispatcher, requestSchema } from "../../../src/gateway/rpc.js";
import { silentLogger } from "../../../src/log.js";
import { seededRandom } from "../../helpers.js";

function dispatcher(): RpcDispatcher {
  return new RpcDispatcher(silentLogger()).register(
    "echo",
    method(z.object({ text: z.string() }), async (p) => ({ text: p.text })),
  );
}

describe("RpcDispatcher", () => {
  afterEach(() => vi.restoreAllMocks());

  it("takes a well-formed call without a schema parse, whether dispatched or checked then run", async () => {
    const rpc = dispatcher();
    const spy = vi.spyOn(requestSchema, "safeParse");
    expect(await rpc.dispatch({ id: 1, method: "echo", params: { text: "hi" } })).toEqual({
      id: 1,
      ok: true,
      result: { text: "hi" },
    });
    const call = rpc.envelope({ id: "a", method: "echo", params: { text: "yo" } });
    if ("error" in call) throw new Error("expected a request");
    expect(await rpc.run(call.request)).toEqual({ id: "a", ok: true, result: { text: "yo" } });
    expect(spy).not.toHaveBeenCalled();
    // a malformed one is parsed (once) for the issues its error names
    expect(await rpc.dispatch({ id: 2, method: "" })).toMatchObject({ id: 2, ok: false });
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it("accepts by hand exactly the envelopes the schema accepts, as the schema reads them", () => {
    const rpc = dispatcher();
    const rnd = seededRandom(18);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const ids = [
      undefined,
      null,
      0,
      -1.5,
      1e300,
      "",
      "a",
      "x".repeat(256),
      "x".repeat(257),
      true,
      {},
      [],
      [1],
    ];
    const methods = [undefined, "", "echo", "chat.send", 3, null, ["echo"], { m: 1 }];
    const params = [undefined, {}, { text: "hi" }, { __proto__: null, a: 1 }, [], [1], null, "p", 0, false];
    for (let i = 0; i < 2_000; i++) {
      const body: Record<string, unknown> = {};
      for (const [k, xs] of [
        ["id", ids],
        ["method", methods],
        ["params", params],
      ] as const) {
        const v = pick(xs as readonly unknown[]);
        if (v !== undefined || rnd() < 0.5) body[k] = v;
      }
      if (rnd() < 0.2) body.extra = pick(ids);
      const shape = rnd() < 0.05 ? pick([null, "body", 7, [body]] as const) : body;
      const zod = requestSchema.safeParse(shape);
      const got = rpc.envelope(shape);
      if (zod.success) expect(got).toEqual({ request: zod.data });
      else expect("error" in got && got.error.ok === false && got.error.error.code).toBe("INVALID_PARAMS");
    }
  });

  it("chat.send's hand check accepts only params its schema accepts unchanged, and every plain one", () => {
    const rnd = seededRandom(1818);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const values: Record<string, readonly unknown[]> = {
      sessionKey: ["", "main", "agent:main:x", 1, null, ["k"]],
      message: ["", "hi", "x".repeat(32_000), "x".repeat(32_001), 0, true, {}],
      timeoutSeconds: [0, 30, 3600, 3600.5, 7200, -1, -0, 1.5, "30", null],
      deliver: [true, false, "true", 0, null],
      other: [1, "x", undefined],
    };
    let accepted = 0;
    for (let i = 0; i < 3_000; i++) {
      const p: Record<string, unknown> = {};
      for (const [k, xs] of Object.entries(values)) {
        if (rnd() < (k === "other" ? 0.1 : k === "sessionKey" || k === "message" ? 0.9 : 0.5))
          p[k] = pick(xs);
      }
      const zod = chatSendParams.safeParse(p);
      const plain = zod.success && JSON.stringify(zod.data) === JSON.stringify(p) && !("other" in p);
      expect(plainChatSend(p)).toBe(plain);
      if (plain) {
        accepted++;
        expect(zod.data).toEqual(p);
      }
    }
    expect(accepted).toBeGreaterThan(100);
  });

  it("answers a malformed envelope with INVALID_PARAMS naming the field, keeping a valid id", async () => {
    const rpc = dispatcher();
    const e = rpc.envelope({ id: 7, params: {} });
    expect("error" in e && e.error).toMatchObject({ id: 7, ok: false, error: { code: "INVALID_PARAMS" } });
    expect("error" in e && e.error.ok === false && e.error.error.message).toMatch(/request: .*method/);
    expect(rpc.envelope({ id: 7, method: "echo" })).toEqual({ request: { id: 7, method: "echo" } });
    expect(await rpc.dispatch("not an object")).toMatchObject({
      id: null,
      ok: false,
      error: { code: "INVALID_PARAMS" },
    });
  });

  it("names an unknown method and a bad param", async () => {
    const rpc = dispatcher();
    expect(await rpc.dispatch({ id: 1, method: "nope" })).toMatchObject({
      ok: false,
      error: { code: "NOT_FOUND" },
    });
    const bad = await rpc.dispatch({ id: 2, method: "echo", params: { text: 3 } });
    expect(bad).toMatchObject({ id: 2, ok: false, error: { code: "INVALID_PARAMS" } });
    expect(bad.ok === false && bad.error.message).toMatch(/params\.text/);
  });
});
