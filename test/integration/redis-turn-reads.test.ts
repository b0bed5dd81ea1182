import { createHash } from "node:crypto";
import { afterEach, expect, it, vi } from "vitest";
import { ackTurn, submitTurn } from "../../src/redis/commands/pipeline.js";
import { appendTranscript, putRun, streamTail } from "../../src/redis/commands/store.js";
import { ScriptRunner } from "../../src/redis/scripts.js";
import { RedisKeys } from "../../src/store/redis/index.js";
import { startTestApp, startTestWorker, type TestApp } from "../harness.js";
import { REDIS_URL, randomPrefix } from "../helpers.js";
import { describeRedis, dropPrefix, startMonitor } from "../redis.js";

/**
 * Issue 18: on redis + bullmq every round trip of a turn is latency, and a turn read its session
 * four times and its run record three times. Counted with MONITOR over one turn of a warm session
 * (a gateway that also runs turns): the session is read once when the turn is accepted and once
 * when it starts; the run record never: the caller waiting for it (chat.send) pushed the run while
 * its bus listened, so it learns of the finish from the bus without a first read. The patches
 * after those reads (the session's usage, the run's running and final status) write against what
 * this process read or wrote, under the revision check, without reading again. The window read
 * after the inbound message's append asks Redis nothing: that append's reply brought the cached
 * tail up to date (with what other processes had appended).
 */

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 30_000);

/** chat.send through `app` that must answer ok; its runId. */
function sender(app: TestApp, sessionKey: string) {
  return async (message: string): Promise<string> => {
    const r = await app.rpc<{ status: string; runId: string }>("chat.send", {
      sessionKey,
      message,
      timeoutSeconds: 20,
    });
    expect(r.result?.status, JSON.stringify(r)).toBe("ok");
    return r.result!.runId;
  };
}

/** The commands clients (not scripts) send while `fn` runs, as MONITOR saw them. */
async function commandsDuring<T>(fn: () => Promise<T>): Promise<{ value: T; seen: string[][] }> {
  const seen: string[][] = [];
  const stop = await startMonitor((args, source) => {
    if (source !== "lua") seen.push(args);
  });
  cleanups.push(stop);
  await new Promise((r) => setTimeout(r, 50)); // MONITOR is on before the turn
  const value = await fn();
  await new Promise((r) => setTimeout(r, 200)); // the turn's last commands reach the monitor
  return { value, seen };
}

/** How many of `seen` read the hash `key`. */
const readsOf = (seen: string[][], key: string) =>
  seen.filter(([cmd, k]) => /^(hget|hmget|hgetall)$/i.test(cmd ?? "") && k === key).length;

/** redis + bullmq with the scripted echo model, under a prefix of its own (dropped after the test). */
function echoConfig(tag: string) {
  const prefix = randomPrefix(tag);
  cleanups.push(() => dropPrefix(prefix));
  const cfg = {
    storage: { driver: "redis" as const, redisUrl: REDIS_URL, prefix },
    queue: { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix: `${prefix}q` },
    models: {
      default: "s/echo",
      providers: { s: { kind: "scripted" as const, rules: [{ match: "^(.*)$", reply: "re: $1" }] } },
    },
  };
  return { prefix, cfg };
}

/** A gateway (that also runs turns) on `echoConfig(tag)`, stopped after the test. */
async function startEcho(tag: string): Promise<{ t: TestApp; prefix: string }> {
  const { prefix, cfg } = echoConfig(tag);
  const t = await startTestApp(cfg);
  cleanups.push(() => t.stop());
  return { t, prefix };
}

/** A latch a held reply waits for: at most 2 s, so a build that waits on the reply first goes on. */
function latchOf(): { open: () => void; wait: () => Promise<unknown> } {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, wait: () => Promise.race([opened, new Promise((r) => setTimeout(r, 2000))]) };
}

type ScriptCall = Parameters<ScriptRunner["run"]>;

/** Every script run goes through `around` (`real` sends it) until the test ends. */
function aroundScripts(
  around: (real: () => Promise<unknown>, ...call: ScriptCall) => Promise<unknown>,
): void {
  const run = ScriptRunner.prototype.run;
  const spy = vi.spyOn(ScriptRunner.prototype, "run").mockImplementation(function (
    this: ScriptRunner,
    ...call
  ) {
    return around(() => run.apply(this, call), ...call);
  });
  cleanups.push(() => spy.mockRestore());
}

describeRedis("round trips of a turn on redis + bullmq", () => {
  it("reads the session twice, the run record never, and the window from the tail its append brought up to date", {
    timeout: 30_000,
  }, async () => {
    const { t, prefix } = await startEcho("reads");
    const sessionKey = "agent:main:reads";
    const send = sender(t, sessionKey);
    await send("first"); // creates the session
    const { value: runId, seen } = await commandsDuring(() => send("second"));

    const keys = new RedisKeys(prefix);
    const reads = (key: string) => readsOf(seen, key);
    // the turn happened where the monitor could see it
    expect(seen.some((args) => args.includes(keys.run(runId)))).toBe(true);
    expect(reads(keys.session(sessionKey))).toBe(2);
    expect(reads(keys.run(runId))).toBe(0);
    const tailSha = createHash("sha1").update(streamTail.lua).digest("hex");
    const appendSha = createHash("sha1").update(appendTranscript.lua).digest("hex");
    // (MONITOR sees every client: other test files' scripts run beside this one)
    const mine = `{${prefix}}:`;
    const scriptCalls = (sha: string) =>
      seen.filter(([cmd, s, , key]) => /^evalsha$/i.test(cmd ?? "") && s === sha && key?.startsWith(mine));
    expect(scriptCalls(appendSha)).toHaveLength(2); // the message and the reply
    expect(scriptCalls(tailSha)).toEqual([]);
    // and what the patches wrote is the turn's outcome
    const rec = await t.rpc<{ status: string; reply?: string }>("runs.get", { runId });
    expect(rec.result).toMatchObject({ status: "ok", reply: "re: second" });
  });

  it("the turn's first reads (its session, the yield flag) go out before the write that marks its run running", {
    timeout: 30_000,
  }, async () => {
    const { t, prefix } = await startEcho("reads-p");
    const sessionKey = "agent:main:reads-p";
    const send = sender(t, sessionKey);
    await send("first");
    // an earlier turn yielded: this one, which does not, clears its flag (with what it read early)
    await t.app.services.store.kv.set("subagents.yielded", sessionKey, { runId: "an-earlier-run" });
    const { value: runId, seen: all } = await commandsDuring(() => send("second"));
    const seen = all.slice(); // (the monitor goes on seeing this test's own reads)
    expect(await t.app.services.store.kv.get("subagents.yielded", sessionKey)).toBeNull();
    const keys = new RedisKeys(prefix);
    const putRunSha = createHash("sha1").update(putRun.lua).digest("hex");
    // one connection carries them all, in the order they were sent
    const order = seen.flatMap(([cmd, a, ...rest]) => {
      if (/^hmget$/i.test(cmd ?? "") && a === keys.session(sessionKey)) return ["session read"];
      if (/^hget$/i.test(cmd ?? "") && a === keys.kv("subagents.yielded")) return ["flag read"];
      if (/^evalsha$/i.test(cmd ?? "") && a === putRunSha && rest.includes(keys.run(runId)))
        return ["run write"];
      return [];
    });
    // accepted (read, queued) → the turn's reads → running → final
    expect(order).toEqual([
      "session read",
      "run write",
      "session read",
      "flag read",
      "run write",
      "run write",
    ]);
    const rec = await t.rpc<{ status: string; reply?: string }>("runs.get", { runId });
    expect(rec.result).toMatchObject({ status: "ok", reply: "re: second" });
  });

  it("chat.send answers once the run's final record is written, not a round trip later when the ack comes back", {
    timeout: 30_000,
  }, async () => {
    const { t } = await startEcho("reads-a");
    const send = sender(t, "agent:main:reads-a");
    await send("first");
    const order: string[] = [];
    const answered = latchOf();
    aroundScripts(async (real, def) => {
      if (def !== ackTurn) return real();
      // the ack's reply is held until chat.send answered
      const reply = await real();
      await answered.wait();
      order.push("ack's reply");
      return reply;
    });
    const runId = await send("second");
    order.push("chat.send answered");
    answered.open();
    await vi.waitFor(() => expect(order).toHaveLength(2));
    expect(order).toEqual(["chat.send answered", "ack's reply"]);
    // and the turn was acked: the session takes its next turn at once
    const rec = await t.rpc<{ status: string; reply?: string }>("runs.get", { runId });
    expect(rec.result).toMatchObject({ status: "ok", reply: "re: second" });
    await send("third");
  });

  it("with the store on the queue's Redis, a message's queued record and its push go out together; a record write that fails does not lose the turn", {
    timeout: 30_000,
  }, async () => {
    const { t } = await startEcho("reads-q");
    const send = sender(t, "agent:main:reads-q");
    await send("first");
    const order: string[] = [];
    const pushed = latchOf();
    let failQueued = false;
    aroundScripts(async (real, def, _keys, args) => {
      if (def === submitTurn) {
        order.push("push sent");
        pushed.open();
      }
      const queued = def === putRun && args.some((a) => String(a).includes('"status":"queued"'));
      if (!queued) return real();
      // the queued record's reply is held until the push was sent
      const fail = failQueued;
      failQueued = false; // only the record's first write
      const reply = fail ? Promise.reject(new Error("record write refused")) : real();
      reply.catch(() => undefined);
      await pushed.wait();
      order.push("record written");
      return reply;
    });
    await send("second");
    expect(order).toEqual(["push sent", "record written"]);

    // the record's write fails, the push succeeds: the turn is accepted and runs; its record is
    // written whole when it starts
    failQueued = true;
    const runId = await send("third");
    const rec = await t.app.services.store.runs.get(runId);
    expect(rec).toMatchObject({ status: "ok", reply: "re: third", sessionKey: "agent:main:reads-q" });
    expect(rec?.createdAt).toEqual(expect.any(Number));
  });

  it("a worker that runs a turn another process accepted marks it running without reading the run record", {
    timeout: 30_000,
  }, async () => {
    const { prefix, cfg } = echoConfig("reads-w");
    const gateway = await startTestApp({ ...cfg, queue: { ...cfg.queue, runTurns: false } });
    cleanups.push(() => gateway.stop());
    const worker = await startTestWorker(cfg);
    cleanups.push(() => worker.stop());
    const send = sender(gateway, "agent:main:reads-w");
    await send("first");
    const { value: runId, seen } = await commandsDuring(() => send("second"));

    const keys = new RedisKeys(prefix);
    expect(seen.some((args) => args.includes(keys.run(runId)))).toBe(true);
    // nobody read the run record: the gateway waited on the bus, the worker wrote against the
    // queued record it rebuilt from the accepted request (the same JSON the gateway stored)
    expect(readsOf(seen, keys.run(runId))).toBe(0);
    const rec = await gateway.rpc<{ status: string; reply?: string; startedAt?: number }>("runs.get", {
      runId,
    });
    expect(rec.result).toMatchObject({ status: "ok", reply: "re: second" });
    expect(rec.result?.startedAt).toEqual(expect.any(Number));
  });
});
