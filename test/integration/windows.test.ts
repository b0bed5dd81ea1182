import { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { inboundMessageSchema } from "../../src/channels/types.js";
import type { ConfigInput } from "../../src/config/index.js";
import { ChannelDelivery } from "../../src/delivery/index.js";
import { SwitchboardError } from "../../src/errors.js";
import { createLogger, type Logger } from "../../src/log.js";
import { inboundDedupeId } from "../../src/routing/gates/dedupe.js";
import { createFsStore, type FsStore } from "../../src/store/fs/index.js";
import { MemoryChannel } from "../fakes/memory-channel.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually, tempDir } from "../helpers.js";

/**
 * One deterministic test per crash window of "nothing lost, nothing twice" (issue 11): the
 * window is opened by hand (a lease left by a sender that died, a submit that fails once), then
 * the system must neither lose nor double the effect.
 */

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function captureLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split("\n")) if (l.trim()) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { logger: createLogger({ level: "debug", destination: dest }), lines };
}

async function fsStore(): Promise<FsStore> {
  const t = tempDir();
  const store = await createFsStore({ stateDir: t.dir, logger: createLogger({ level: "silent" }) });
  cleanups.push(t.cleanup, () => store.close());
  return store;
}

describe("delivery: a crash between the outbox lease and the send", () => {
  it("re-sends once the dead sender's lease ran out (warn with the idempotency key), then never again", async () => {
    const store = await fsStore();
    const { logger, lines } = captureLogger();
    const ch = new MemoryChannel();
    const channels = { get: () => ch, all: () => [ch] };
    const config = (await import("../../src/config/index.js")).parseConfig({});
    await store.sessions.put({
      key: "agent:main:main",
      sessionId: "s1",
      agentId: "main",
      createdAt: 1,
      updatedAt: 1,
      deliveryContext: { channel: "memory", to: "u1" },
    });
    let slept = 0;
    const delivery = new ChannelDelivery(
      { store, config, channels, logger },
      async (ms) => {
        slept += ms;
        await new Promise((r) => setTimeout(r, ms));
      },
      400,
    );
    // the first attempt took the lease and died before adapter.send (no mark, no release); taken
    // right before the delivery, and long enough that a loaded machine does not outrun it (50 ms did)
    expect(await store.outbox.lease("reply:r1#0", 400, 3_600_000)).toMatchObject({ acquired: true });
    const first = await delivery.deliver({
      sessionKey: "agent:main:main",
      text: "hello",
      idempotencyKey: "reply:r1",
    });
    expect(first).toMatchObject({ status: "sent" });
    expect(ch.texts()).toEqual(["hello"]);
    expect(slept).toBeGreaterThan(0); // it waited for the lease instead of reporting "duplicate"
    const warn = lines.find((l) => l.idempotencyKey === "reply:r1#0");
    expect(warn).toMatchObject({ level: 40 });
    // the mark is there now: a re-run of the job does not post again
    expect(
      await delivery.deliver({ sessionKey: "agent:main:main", text: "hello", idempotencyKey: "reply:r1" }),
    ).toEqual({
      status: "duplicate",
    });
    expect(ch.texts()).toEqual(["hello"]);
    expect(await store.outbox.get("reply:r1#0")).toMatchObject({ state: "done" });
  });

  it("a failed send releases the lease: the retry sends at once", async () => {
    const store = await fsStore();
    const ch = new MemoryChannel();
    const config = (await import("../../src/config/index.js")).parseConfig({});
    await store.sessions.put({
      key: "agent:main:main",
      sessionId: "s1",
      agentId: "main",
      createdAt: 1,
      updatedAt: 1,
      deliveryContext: { channel: "memory", to: "u1" },
    });
    const delivery = new ChannelDelivery(
      {
        store,
        config,
        channels: { get: () => ch, all: () => [ch] },
        logger: createLogger({ level: "silent" }),
      },
      async () => {
        throw new Error("must not wait");
      },
    );
    ch.failNext("error");
    const req = { sessionKey: "agent:main:main", text: "hi", idempotencyKey: "reply:r2" };
    expect(await delivery.deliver(req)).toMatchObject({ status: "failed" });
    expect(await delivery.deliver(req)).toMatchObject({ status: "sent" });
    expect(ch.texts()).toEqual(["hi"]);
  });
});

describe("inbound: a failed accept, then the platform's redelivery", () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
  });

  async function setup(overrides: Partial<ConfigInput> = {}) {
    t = await startTestApp({
      models: {
        default: "s/echo",
        providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "re: $1" }] } },
      },
      ...overrides,
    });
    const ch = new MemoryChannel("memory", "default");
    (t.app.services.channels as unknown as { add(a: MemoryChannel): void }).add(ch);
    return t;
  }

  const msg = inboundMessageSchema.parse({
    channel: "memory",
    accountId: "default",
    chatType: "direct",
    peerId: "u1",
    senderId: "u1",
    messageId: "p-77",
    text: "hello there",
  });

  it("is not dropped as a duplicate: the claim is released and the redelivery is accepted once", async () => {
    const app = await setup();
    const pipeline = app.app.services.pipeline;
    const real = pipeline.submitTurn.bind(pipeline);
    let fail = 1;
    pipeline.submitTurn = async (req) => {
      if (fail-- > 0) throw new SwitchboardError("UNAVAILABLE", "redis blip");
      return real(req);
    };
    await expect(app.app.router.handle(msg)).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(await app.app.services.store.outbox.get(inboundDedupeId(msg))).toBeNull();
    const again = await app.app.router.handle(msg);
    expect(again.accepted).toBe(true);
    const run = await pipeline.wait(again.runId!, 10_000);
    expect(run?.status).toBe("ok");
    // a third copy (the platform retried once more) is a duplicate, and so is a lost mark
    expect(await app.app.router.handle(msg)).toMatchObject({ accepted: false, dropped: "duplicate" });
    await app.app.services.store.outbox.release(inboundDedupeId(msg));
    await app.app.services.store.outbox.complete(inboundDedupeId(msg), { messageIds: [] }, 1);
    await eventually(async () => (await app.app.services.store.outbox.get(inboundDedupeId(msg))) === null);
    const fourth = await app.app.router.handle(msg);
    expect(fourth.runId).toBe(again.runId); // same derived run id: the pipeline ignored it
    const hist = await app.rpc("sessions.history", { sessionKey: again.sessionKey, limit: 20 });
    const users = hist.result.messages.filter((m: { role: string }) => m.role === "user");
    expect(users).toHaveLength(1);
  });

  it("a redelivery while the first copy is still being accepted is answered retryable, not dropped", async () => {
    const app = await setup();
    const pipeline = app.app.services.pipeline;
    const real = pipeline.submitTurn.bind(pipeline);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    pipeline.submitTurn = async (req) => {
      await gate;
      return real(req);
    };
    const first = app.app.router.handle({ ...msg, messageId: "p-78" });
    await eventually(() => app.app.services.store.outbox.get(inboundDedupeId({ ...msg, messageId: "p-78" })));
    await expect(app.app.router.handle({ ...msg, messageId: "p-78" })).rejects.toMatchObject({
      code: "UNAVAILABLE",
    });
    release();
    expect((await first).accepted).toBe(true);
  });
});

describe("a follow-up submit that fails (the sub-agent announce during a queue blip)", () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    for (const a of apps.splice(0).reverse()) await a.stop();
  });

  const config: Partial<ConfigInput> = {
    models: {
      default: "s/echo",
      providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "done" }] } },
    },
  };

  async function start(dir: string): Promise<TestApp> {
    const app = await startTestApp(config, { dir });
    apps.push(app);
    return app;
  }

  /** Every submit of an announce job fails `failures` times (then works) in this app. */
  async function spawnWith(app: TestApp, failures: number) {
    const pipeline = app.app.services.pipeline;
    const real = pipeline.submit.bind(pipeline);
    let left = failures;
    let announceSubmits = 0;
    pipeline.submit = async (job, opts) => {
      if (job.kind === "announce") {
        announceSubmits++;
        if (left-- > 0) throw new SwitchboardError("UNAVAILABLE", "queue blip");
      }
      return real(job, opts);
    };
    await app.rpc("chat.send", { sessionKey: "main", message: "hi", timeoutSeconds: 20 });
    const spawned = await app.invoke("agent:main:main", "sessions_spawn", { task: "dig" });
    const run = await pipeline.wait(spawned.runId, 20_000);
    return { run, spawned, announceSubmits: () => announceSubmits };
  }

  async function announces(app: TestApp, childRunId: string, wait: boolean): Promise<number> {
    const entry = (await app.app.services.store.sessions.get("agent:main:main"))!;
    const ref = { agentId: "main", sessionId: entry.sessionId };
    const count = async () =>
      (await app.app.services.store.transcripts.readTail(ref, { limit: 50, includeTools: true })).filter(
        (m) => m.id === `announce:${childRunId}`,
      ).length;
    if (!wait) return count();
    return (await eventually(async () => ((await count()) > 0 ? count() : undefined), 400, 25)) ?? 0;
  }

  it("is retried, and the announce arrives exactly once", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const app = await start(t.dir);
    const { run, spawned, announceSubmits } = await spawnWith(app, 2);
    expect(run?.status).toBe("ok");
    expect(await announces(app, spawned.runId, true)).toBe(1);
    expect(announceSubmits()).toBe(3);
  }, 30_000);

  it("that keeps failing does not lose it: the run ends ok with the announce committed, and a restart sends it", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const first = await start(t.dir);
    const { run, spawned, announceSubmits } = await spawnWith(first, 1_000_000);
    // ok means committed: the announce is in the journal's outbox with the run's final status.
    expect(run?.status).toBe("ok");
    await eventually(() => announceSubmits() > 0, 200, 10);
    expect(announceSubmits()).toBeGreaterThan(0);
    expect(await announces(first, spawned.runId, false)).toBe(0);
    await first.stop();
    apps.splice(apps.indexOf(first), 1);

    const second = await start(t.dir);
    expect(await announces(second, spawned.runId, true)).toBe(1);
    expect((await second.app.services.store.runs.get(spawned.runId))?.status).toBe("ok");
  }, 30_000);
});
