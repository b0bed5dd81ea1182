import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliverRoutedReply } from "../../src/flows/routed-reply.js";
import { ensureSession } from "../../src/sessions/service.js";
import { FakeTelegram } from "../fakes/telegram.js";
import { startTestApp, type TestApp } from "../harness.js";
import { eventually, tempDir } from "../helpers.js";

/** Cron jobs through the real composition root (local queue, fs store). */

const scripted = (rules: unknown[]) => ({
  default: "s/echo",
  providers: { s: { kind: "scripted" as const, rules } },
});

const FAIL_RULES = [
  { match: { contains: "report" }, reply: "Daily report: all good" },
  { match: { contains: "silent" }, reply: "NO_REPLY" },
  {
    match: { contains: "remind me" },
    toolCalls: [
      { name: "cron", args: { action: "add", id: "bob", in: "1s", message: "reminder: call Bob" } },
    ],
    afterTools: "Reminder set",
  },
  { match: { contains: "reminder: call Bob" }, reply: "Time to call Bob!" },
];

async function runOf(t: TestApp, runId: string) {
  const r = await t.app.services.pipeline.wait(runId, 10_000);
  expect(r?.status).not.toBe("queued");
  return r;
}

describe("cron jobs over RPC", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      models: scripted(FAIL_RULES),
      cron: {
        jobs: [{ id: "cfg", schedule: { cron: "0 7 * * *", tz: "Europe/Berlin" }, message: "report" }],
      },
    });
  });
  afterAll(() => t?.stop());

  it("add / list / update / remove, with errors naming the field", async () => {
    const bad = await t.rpc("cron.add", {
      job: { id: "x", schedule: { cron: "61 * * * *" }, message: "hi" },
    });
    expect(bad.ok).toBe(false);
    expect(bad.error?.code).toBe("INVALID_PARAMS");
    expect(bad.error?.message).toContain("job.schedule.cron");
    const badTz = await t.rpc("cron.add", {
      job: { id: "x", schedule: { cron: "0 7 * * *", tz: "Nowhere/X" }, message: "hi" },
    });
    expect(badTz.error?.message).toContain("job.schedule.tz");
    const badDelivery = await t.rpc("cron.add", {
      job: { id: "x", schedule: { every: "1h" }, message: "hi", delivery: { mode: "announce", to: "123" } },
    });
    expect(badDelivery.error?.message).toContain("job.delivery.channel");

    // `to: "last", from`: an agent's main session always exists (SEMANTICS §1), also as `main`.
    expect(await t.app.services.store.sessions.get("agent:main:main")).toBeNull();
    for (const from of ["agent:main:main", "main"]) {
      const last = await t.rpc("cron.add", {
        job: { schedule: { every: "1h" }, message: "x", delivery: { mode: "announce", to: "last", from } },
      });
      expect(last.ok).toBe(true);
      expect(last.result.job.delivery).toEqual({ mode: "announce", to: "last", from: "agent:main:main" });
      expect((await t.rpc("cron.remove", { id: last.result.job.id })).ok).toBe(true);
    }
    const noSuchFrom = await t.rpc("cron.add", {
      job: {
        schedule: { every: "1h" },
        message: "x",
        delivery: { mode: "announce", to: "last", from: "agent:main:telegram:direct:9" },
      },
    });
    expect(noSuchFrom.error?.code).toBe("INVALID_PARAMS");
    expect(noSuchFrom.error?.message).toContain("job.delivery.from");

    const added = await t.rpc("cron.add", {
      job: { id: "hourly", schedule: { every: "1h" }, message: "report" },
    });
    expect(added.ok).toBe(true);
    expect(added.result.job).toMatchObject({
      id: "hourly",
      agentId: "main",
      enabled: true,
      session: "persistent",
    });
    expect(added.result.job.nextRunAt % 3_600_000).toBe(0);
    expect(
      (await t.rpc("cron.add", { job: { id: "hourly", schedule: { every: "1h" }, message: "x" } })).error
        ?.code,
    ).toBe("CONFLICT");

    const list = await t.rpc("cron.list");
    const ids = list.result.jobs.map((j: { id: string }) => j.id);
    expect(ids).toEqual(["cfg", "hourly"]);
    const cfg = list.result.jobs[0];
    expect(cfg).toMatchObject({
      id: "cfg",
      agentId: "main",
      enabled: true,
      schedule: { cron: "0 7 * * *", tz: "Europe/Berlin" },
    });
    expect(typeof cfg.nextRunAt).toBe("number");

    const upd = await t.rpc("cron.update", {
      id: "hourly",
      patch: { schedule: { every: "30m" }, enabled: false },
    });
    expect(upd.result.job).toMatchObject({ schedule: { every: "30m" }, enabled: false, nextRunAt: null });
    expect((await t.rpc("cron.update", { id: "hourly", patch: { message: "" } })).error?.message).toContain(
      "patch.message",
    );
    expect((await t.rpc("cron.update", { id: "cfg", patch: { enabled: false } })).error?.code).toBe(
      "FORBIDDEN",
    );
    expect((await t.rpc("cron.remove", { id: "hourly" })).result).toEqual({ removed: true });
    expect((await t.rpc("cron.remove", { id: "hourly" })).error?.code).toBe("NOT_FOUND");
  });

  it("cron.run runs a turn in cron:<id>, listed as kind cron on channel internal, with a run log", async () => {
    const run = await t.rpc("cron.run", { id: "cfg" });
    expect(run.result).toMatchObject({ status: "accepted" });
    const rec = await runOf(t, run.result.runId);
    expect(rec?.status).toBe("ok");
    const runs = await eventually(async () => {
      const r = await t.rpc("cron.runs", { id: "cfg" });
      return r.result.runs[0]?.status === "ok" ? r.result.runs : null;
    });
    expect(runs[0]).toMatchObject({
      runId: run.result.runId,
      status: "ok",
      replyPreview: "Daily report: all good",
      trigger: "manual",
    });
    expect(runs[0].endedAt).toBeGreaterThanOrEqual(runs[0].startedAt);
    const rows = (await t.rpc("sessions.list", { kinds: ["cron"] })).result.sessions;
    expect(
      rows.map((r: { key: string; kind: string; channel: string }) => [r.key, r.kind, r.channel]),
    ).toEqual([["cron:cfg", "cron", "internal"]]);
    const entry = await t.app.services.store.sessions.get("cron:cfg");
    const msgs = await t.app.services.store.transcripts.readTail(
      { agentId: "main", sessionId: entry?.sessionId ?? "" },
      { limit: 10 },
    );
    expect(msgs[0]?.provenance?.kind).toBe("cron");
    const listed = (await t.rpc("cron.list")).result.jobs.find((j: { id: string }) => j.id === "cfg");
    expect(listed.lastRun).toMatchObject({ status: "ok" });
    expect(typeof listed.lastRun.durationMs).toBe("number");
  });

  it("a tick delivered twice is one run", async () => {
    const cron = t.app.services.cron!;
    const tickAt = Date.parse("2026-01-05T06:00:00Z");
    const a = await cron.fire({ jobId: "cfg", tickAt, late: false });
    const b = await cron.fire({ jobId: "cfg", tickAt, late: false });
    expect(a?.runId).toBe(b?.runId);
    await runOf(t, a?.runId ?? "");
    const runs = (await t.rpc("cron.runs", { id: "cfg", limit: 50 })).result.runs.filter(
      (r: { runId: string }) => r.runId === a?.runId,
    );
    expect(runs).toHaveLength(1);
  });
});

describe("isolated sessions, backoff and at jobs (injected clock)", () => {
  let t: TestApp;
  let now = Date.parse("2026-05-01T10:00:00Z");
  beforeAll(async () => {
    t = await startTestApp(
      {
        models: scripted(FAIL_RULES),
        // The scheduler itself is off: the test hands ticks to the service (the drivers are tested apart).
        cron: { enabled: false, sessionRetention: "24h" },
      },
      { now: () => now },
    );
  });
  afterAll(() => t?.stop());

  it("isolated runs get a fresh cron:<id>:run:<uuid> each, pruned after cron.sessionRetention", async () => {
    await t.rpc("cron.add", {
      job: { id: "iso", schedule: { every: "1h" }, message: "report", session: "isolated" },
    });
    const r1 = await t.rpc("cron.run", { id: "iso" });
    const r2 = await t.rpc("cron.run", { id: "iso" });
    await runOf(t, r1.result.runId);
    await runOf(t, r2.result.runId);
    const keys = (await t.rpc("sessions.list", { kinds: ["cron"] })).result.sessions.map(
      (s: { key: string }) => s.key,
    );
    const iso = keys.filter((k: string) => k.startsWith("cron:iso:run:"));
    expect(iso).toHaveLength(2);
    expect(iso[0]).toMatch(
      /^cron:iso:run:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(await t.app.services.cron!.pruneIsolated()).toBe(0);
    now += 25 * 3_600_000;
    expect(await t.app.services.cron!.pruneIsolated()).toBe(2);
    const after = (await t.rpc("sessions.list", { kinds: ["cron"] })).result.sessions;
    expect(after.filter((s: { key: string }) => s.key.startsWith("cron:iso:run:"))).toHaveLength(0);
  });

  it("consecutive failures back off 30 s, 1 min, 5 min and return to the schedule after a success", async () => {
    const cron = t.app.services.cron!;
    await t.rpc("cron.add", { job: { id: "flaky", schedule: { every: "10s" }, message: "report" } });
    // A session model that no provider serves: every run ends with status "error".
    await ensureSession(t.app.services, "cron:flaky", { agentId: "main", model: "missing/model" });
    const seen: number[] = [];
    let tick = Math.ceil(now / 10_000) * 10_000;
    const fireAt = async (ms: number) => {
      now = ms;
      const r = await cron.fire({ jobId: "flaky", tickAt: ms, late: false });
      if (r) await runOf(t, r.runId);
      return r;
    };
    for (let i = 0; i < 3; i++) {
      expect(await fireAt(tick)).not.toBeNull();
      const st = await cron.state("flaky");
      seen.push((st.backoffUntil ?? 0) - now);
      // The next scheduled tick inside the backoff window is skipped.
      expect(await fireAt(tick + 10_000)).toBeNull();
      tick = Math.ceil(((st.backoffUntil ?? 0) + 1) / 10_000) * 10_000;
    }
    expect(seen).toEqual([30_000, 60_000, 300_000]);
    expect((await cron.state("flaky")).failures).toBe(3);
    // A manual run is logged but leaves the failure count and the backoff alone.
    const before = await cron.state("flaky");
    await runOf(t, (await t.rpc("cron.run", { id: "flaky" })).result.runId);
    const afterManual = await cron.state("flaky");
    expect(afterManual).toMatchObject({ failures: 3, backoffUntil: before.backoffUntil });
    expect(afterManual.lastRun?.status).toBe("error");
    await t.app.services.store.sessions.patch("cron:flaky", { model: undefined });
    expect(await fireAt(tick)).not.toBeNull();
    const st = await cron.state("flaky");
    expect(st).toMatchObject({ failures: 0 });
    expect(st.backoffUntil).toBeUndefined();
    expect(await fireAt(tick + 10_000)).not.toBeNull(); // back on schedule
    const runs = (await t.rpc("cron.runs", { id: "flaky", limit: 10 })).result.runs;
    expect(runs.map((r: { status: string }) => r.status)).toEqual([
      "ok",
      "ok",
      "error",
      "error",
      "error",
      "error",
    ]);
    expect(runs[2].error).toContain("missing");
  });

  it("an at job is deleted after success unless deleteAfterRun is false; a missed tick honours catchUp", async () => {
    const cron = t.app.services.cron!;
    const at = new Date(now + 60_000).toISOString();
    await t.rpc("cron.add", { job: { id: "once", schedule: { at }, message: "report" } });
    await t.rpc("cron.add", {
      job: { id: "keep", schedule: { at }, message: "report", deleteAfterRun: false },
    });
    // API.md §7's example job sets deleteAfterRun on a cron schedule: accepted, it acts on `at` jobs only.
    const every = await t.rpc("cron.add", {
      job: { id: "every", schedule: { every: "1h" }, message: "report", deleteAfterRun: true },
    });
    expect(every.ok).toBe(true);
    expect(every.result.job.deleteAfterRun).toBeUndefined();
    now += 60_000;
    for (const id of ["once", "keep"]) {
      const r = await cron.fire({ jobId: id, tickAt: Date.parse(at), late: false });
      await runOf(t, r?.runId ?? "");
    }
    const r = await cron.fire({
      jobId: "every",
      tickAt: Math.ceil(now / 3_600_000) * 3_600_000,
      late: false,
    });
    await runOf(t, r?.runId ?? "");
    const ids = (await t.rpc("cron.list")).result.jobs.map((j: { id: string }) => j.id);
    expect(ids).not.toContain("once");
    expect(ids).toContain("keep");
    expect(ids).toContain("every");
    expect(await cron.fire({ jobId: "keep", tickAt: Date.parse(at), late: false })).toBeNull();

    await t.rpc("cron.add", {
      job: { id: "stale", schedule: { every: "1h" }, message: "report", catchUp: "skip" },
    });
    expect(await cron.fire({ jobId: "stale", tickAt: now - 3_600_000, late: true })).toBeNull();
    const runs = (await t.rpc("cron.runs", { id: "stale" })).result.runs;
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ status: "skipped" });
  });
});

describe("restart on the local driver", () => {
  it("a tick missed while down runs once at start (catchUp once) and is skipped with catchUp skip", async () => {
    const dir = tempDir();
    let now = Date.parse("2026-07-01T10:30:00Z");
    const cfg = {
      models: scripted(FAIL_RULES),
      cron: {
        jobs: [
          { id: "hourly", schedule: { cron: "0 * * * *" }, message: "report" },
          { id: "skipper", schedule: { cron: "0 * * * *" }, message: "report", catchUp: "skip" as const },
        ],
      },
    };
    const a = await startTestApp(cfg, { dir: dir.dir, now: () => now });
    expect((await a.rpc("cron.list")).result.jobs[0].nextRunAt).toBe(Date.parse("2026-07-01T11:00:00Z"));
    await a.stop();
    now = Date.parse("2026-07-01T14:10:00Z"); // 11:00 … 14:00 missed
    const b = await startTestApp(cfg, { dir: dir.dir, now: () => now });
    try {
      const runs = await eventually(async () => {
        const r = (await b.rpc("cron.runs", { id: "hourly" })).result.runs;
        return r[0]?.status === "ok" ? r : null;
      });
      expect(runs).toHaveLength(1);
      expect(runs[0]).toMatchObject({ trigger: "catch-up" });
      const skipped = (await b.rpc("cron.runs", { id: "skipper" })).result.runs;
      expect(skipped.map((r: { status: string }) => r.status)).toEqual(["skipped"]);
      const jobs = (await b.rpc("cron.list")).result.jobs;
      expect(jobs.map((j: { nextRunAt: number }) => j.nextRunAt)).toEqual([
        Date.parse("2026-07-01T15:00:00Z"),
        Date.parse("2026-07-01T15:00:00Z"),
      ]);
    } finally {
      await b.stop();
    }
    // A third start at the same instant: nothing is fired again.
    const c = await startTestApp(cfg, { dir: dir.dir, now: () => now });
    try {
      expect((await c.rpc("cron.runs", { id: "hourly" })).result.runs).toHaveLength(1);
    } finally {
      await c.stop();
      dir.cleanup();
    }
  });
});

describe("delivery to the Telegram fake", () => {
  let tg: FakeTelegram;
  let t: TestApp;
  const CHAT = 555;
  const OWNER = { id: 42, is_bot: false, first_name: "Olivia" };
  beforeAll(async () => {
    tg = await FakeTelegram.start();
    t = await startTestApp(
      {
        models: scripted(FAIL_RULES),
        tools: { profile: "coding" },
        session: { sendPolicy: { rules: [{ match: { keyPrefix: "cron:blocked" }, action: "deny" }] } },
        channels: {
          telegram: { accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } }, allowFrom: ["*"] },
        },
        hooks: { enabled: true, token: "hook-secret-0123456789" },
        cron: {
          jobs: [
            {
              id: "tomain",
              schedule: { every: "1d" },
              message: "report",
              delivery: { mode: "announce", to: "last", from: "main" },
            },
          ],
        },
      },
      { listen: true },
    );
  });
  afterAll(async () => {
    await t?.stop();
    await tg?.close();
  });
  const sent = (chat: number) => tg.sentMessages().filter((m) => m.chat_id === String(chat));
  const delivery = { mode: "announce", channel: "telegram", to: String(CHAT), accountId: "default" };

  it("announces the reply to an explicit chat; NO_REPLY and a denied chat post nothing", async () => {
    await t.rpc("cron.add", { job: { id: "daily", schedule: { every: "1d" }, message: "report", delivery } });
    await t.rpc("cron.add", { job: { id: "quiet", schedule: { every: "1d" }, message: "silent", delivery } });
    await t.rpc("cron.add", {
      job: { id: "blocked", schedule: { every: "1d" }, message: "report", delivery },
    });
    for (const id of ["daily", "quiet", "blocked"])
      await runOf(t, (await t.rpc("cron.run", { id })).result.runId);
    const msg = await eventually(() => sent(CHAT).find((m) => m.text.includes("Daily report")));
    expect(msg.text).toBe("Daily report: all good");
    expect(sent(CHAT)).toHaveLength(1);
    const quiet = (await t.rpc("cron.runs", { id: "quiet" })).result.runs[0];
    expect(quiet).toMatchObject({ status: "ok", delivery: "skipped (silent reply)" });
    const blocked = (await t.rpc("cron.runs", { id: "blocked" })).result.runs[0];
    expect(blocked.delivery).toContain("send blocked by session policy");
  });

  it("the outbox keeps a retried delivery from posting twice", async () => {
    const before = sent(CHAT).length;
    const req = {
      policySessionKey: "cron:daily",
      route: { channel: "telegram", to: String(CHAT), accountId: "default" },
      text: "once only",
      idempotencyKey: "cron:test-run",
    };
    expect((await deliverRoutedReply(t.app.services, req)).delivery).toBe("sent to telegram");
    expect((await deliverRoutedReply(t.app.services, req)).delivery).toBe("sent (already posted)");
    expect(sent(CHAT).length).toBe(before + 1);
  });

  it("the cron tool sets a reminder for the agent's own chat (delivery last)", async () => {
    tg.pushMessage({ id: OWNER.id, type: "private" }, OWNER, { text: "please remind me" });
    await eventually(() => sent(OWNER.id).find((m) => m.text.includes("Reminder set")), 500, 20);
    const job = (await t.rpc("cron.list")).result.jobs.find((j: { id: string }) => j.id === "bob");
    expect(job).toMatchObject({
      agentId: "main",
      delivery: { mode: "announce", to: "last", from: "agent:main:main" },
      createdBy: "agent:main:main",
    });
    expect(job.schedule.at).toBeDefined();
    const reminder = await eventually(
      () => sent(OWNER.id).find((m) => m.text.includes("Time to call Bob")),
      500,
      20,
    );
    expect(reminder.text).toBe("Time to call Bob!");
    // A one-shot job is gone after it succeeded.
    await eventually(
      async () => !(await t.rpc("cron.list")).result.jobs.some((j: { id: string }) => j.id === "bob"),
    );
  });

  it("a config job with to: last, from: main announces to the chat the main session last talked in", async () => {
    // the owner chatted in the main session in the test before
    const before = sent(OWNER.id).length;
    await runOf(t, (await t.rpc("cron.run", { id: "tomain" })).result.runId);
    const posted = await eventually(() =>
      sent(OWNER.id)
        .slice(before)
        .find((m) => m.text.includes("Daily report")),
    );
    expect(posted.text).toBe("Daily report: all good");
    expect((await t.rpc("cron.runs", { id: "tomain" })).result.runs[0].delivery).toBe("sent to telegram");
  });

  it("a webhook turn with deliver: true posts its reply to the named chat (and NO_REPLY posts nothing)", async () => {
    const addr = t.app.address;
    const hook = (body: unknown) =>
      fetch(`http://${addr?.host}:${addr?.port}/hooks/agent`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer hook-secret-0123456789" },
        body: JSON.stringify(body),
      }).then((r) => r.json() as Promise<{ status: string; runId: string }>);
    const quiet = await hook({
      message: "silent",
      deliver: true,
      channel: "telegram",
      to: "777",
      timeoutSeconds: 10,
    });
    expect(quiet.status).toBe("ok");
    const loud = await hook({
      message: "report",
      deliver: true,
      channel: "telegram",
      to: "777",
      timeoutSeconds: 10,
    });
    expect(loud.status).toBe("ok");
    const msg = await eventually(() => sent(777).find((m) => m.text.includes("Daily report")));
    expect(msg.text).toBe("Daily report: all good");
    expect(sent(777)).toHaveLength(1);
  });
});
