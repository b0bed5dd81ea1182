import { describe, expect, it } from "vitest";
import { ChannelLifecycle, type LifecycleSteps } from "../../../../src/channels/kit/lifecycle.js";
import { SwitchboardError } from "../../../../src/errors.js";
import { silentLogger } from "../../../../src/log.js";

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function lifecycle(steps: Partial<LifecycleSteps> = {}) {
  const calls: string[] = [];
  const life: ChannelLifecycle = new ChannelLifecycle("test", silentLogger(), {
    connect: async () => {
      calls.push("connect");
      life.set("connected");
    },
    startError: (err) => new SwitchboardError("UNAVAILABLE", `test start: ${String(err)}`),
    disconnect: () => {
      calls.push("disconnect");
    },
    drain: async () => {
      calls.push("drain");
    },
    ...steps,
  });
  return { life, calls };
}

const handler = async () => {};

describe("channel lifecycle", () => {
  it("a second start keeps the first handler and connects once", async () => {
    const { life, calls } = lifecycle();
    const other = async () => {};
    await life.start(handler);
    await life.start(other);
    expect(life.handler).toBe(handler);
    expect(calls).toEqual(["connect"]);
    expect(life.status()).toEqual({ state: "connected" });
    expect(life.accepting).toBe(true);
  });

  it("a failed start ends in error with the mapped message, and can start again", async () => {
    let fail = true;
    const { life } = lifecycle({
      connect: async () => {
        if (fail) throw new Error("401");
        life.set("connected");
      },
    });
    await expect(life.start(handler)).rejects.toThrow("test start: Error: 401");
    expect(life.status()).toEqual({ state: "error", detail: "test start: Error: 401" });
    expect(life.handler).toBeUndefined();
    fail = false;
    await life.start(handler);
    expect(life.status()).toEqual({ state: "connected" });
  });

  it("stop disconnects, waits for the start, the drain and tracked work, then is stopped; again is a no-op", async () => {
    const connect = deferred();
    const work = deferred<string>();
    const { life, calls } = lifecycle({
      connect: () => connect.promise,
      disconnect: () => {
        calls.push("disconnect");
        connect.reject(new Error("aborted"));
      },
    });
    const started = life.start(handler);
    expect(life.status().state).toBe("starting");
    expect(life.accepting).toBe(false);
    void life.track(work.promise);
    const stopped = life.stop();
    expect(life.stopping).toBe(true);
    await expect(started).rejects.toThrow("aborted");
    let done = false;
    void stopped.then(() => {
      done = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    expect(calls).toEqual(["disconnect", "drain"]);
    work.resolve("ok");
    await stopped;
    expect(life.status()).toEqual({ state: "stopped" });
    await life.stop();
    expect(calls).toEqual(["disconnect", "drain"]);
  });
});
