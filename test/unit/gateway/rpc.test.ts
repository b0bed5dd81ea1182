import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { method, RpcDispatcher, requestSchema } from "../../../src/gateway/rpc.js";
import { silentLogger } from "../../../src/log.js";

function dispatcher(): RpcDispatcher {
  return new RpcDispatcher(silentLogger()).register(
    "echo",
    method(z.object({ text: z.string() }), async (p) => ({ text: p.text })),
  );
}

describe("RpcDispatcher", () => {
  afterEach(() => vi.restoreAllMocks());

  it("parses a call's envelope once, whether dispatched or checked then run", async () => {
    const rpc = dispatcher();
    const spy = vi.spyOn(requestSchema, "safeParse");
    expect(await rpc.dispatch({ id: 1, method: "echo", params: { text: "hi" } })).toEqual({
      id: 1,
      ok: true,
      result: { text: "hi" },
    });
    expect(spy).toHaveBeenCalledTimes(1);
    spy.mockClear();
    const call = rpc.envelope({ id: "a", method: "echo", params: { text: "yo" } });
    if ("error" in call) throw new Error("expected a request");
    expect(await rpc.run(call.request)).toEqual({ id: "a", ok: true, result: { text: "yo" } });
    expect(spy).toHaveBeenCalledTimes(1);
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
