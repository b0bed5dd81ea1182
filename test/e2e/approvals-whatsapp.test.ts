import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWhatsAppChannel, type WhatsAppChannel } from "../../channels/whatsapp/index.js";
import { silentLogger } from "../../src/log.js";
import { type ApprovalsDriver, attachRouted, startApprovalsApp, userMessages } from "../approvals-fixture.js";
import { FakeWhatsApp } from "../fakes/whatsapp.js";
import type { TestApp } from "../harness.js";
import { eventually, tempDir } from "../helpers.js";
import { describeRedis } from "../redis.js";

/**
 * Approvals on WhatsApp (API.md §8.3) through the real Baileys adapter on the loopback fake:
 * WhatsApp has no buttons, so the request is a numbered text (1 allow once, 2 allow always,
 * 3 deny); an owner's `1` in that chat resumes the run and the tool runs once, a stranger's `1`
 * changes nothing. On both drivers: on bullmq the turn waits on a worker while the reply lands
 * on the gateway.
 */

const OWNER = "4917012345678";
const STRANGER = "4915550001111";

function approvalsOnWhatsApp(driver: ApprovalsDriver): void {
  let t: TestApp;
  let wa: FakeWhatsApp;
  let adapter: WhatsAppChannel;
  let cleanup: () => void;
  /** Senders whose inbound message the router has taken (decided, answered or queued). */
  const handled: string[] = [];

  beforeAll(async () => {
    t = await startApprovalsApp(
      {
        // owners only: no accounts here, the test adds the adapter on the fake socket itself
        channels: { whatsapp: { accounts: {}, owners: [`+${OWNER}`], allowFrom: ["*"] } } as never,
      },
      { driver },
    );
    wa = new FakeWhatsApp();
    const dir = tempDir("sb-wa-ap-");
    cleanup = dir.cleanup;
    adapter = createWhatsAppChannel(
      { accountId: "default" },
      { logger: silentLogger(), stateDir: dir.dir, socketFactory: wa.factory, printQr: () => undefined },
    );
    await attachRouted(t, adapter, (msg) => handled.push(`${msg.senderId}:${msg.text}`));
  }, 30_000);

  afterAll(async () => {
    await adapter?.stop();
    await t?.stop();
    cleanup?.();
  });

  const sentTo = (pn: string) => wa.allSent().filter((s) => s.jid === `${pn}@s.whatsapp.net`);

  /** Only the line the tool sent: the a2a reply-back turns that follow it may land meanwhile. */
  const targetMessages = async () => (await userMessages(t.rpc)).filter((c) => c === "wa");

  it("numbered text request; a stranger's 1 changes nothing; the owner's 1 resumes the run once", {
    timeout: 30_000,
  }, async () => {
    expect(adapter.capabilities.buttons).toBeFalsy();
    wa.current.upsert([wa.dm(OWNER, "ping wa")]);
    const request = await eventually(
      () => sentTo(OWNER).find((s) => s.text.includes("Approval needed")),
      500,
      20,
    );
    expect(request.text).toContain("sessions_send");
    expect(request.text).toMatch(/Reply 1 to allow once, 2 to allow always, 3 to deny/);
    const pending = (await t.rpc("approvals.list", {})).result.approvals as Array<{
      id: string;
      runId: string;
    }>;
    expect(pending).toHaveLength(1);
    const { id, runId } = pending[0]!;
    expect(request.text).toContain(id);
    expect((await t.rpc("runs.get", { runId })).result.status).toBe("waiting");

    // a stranger's "1", from their own chat: no request is pending there, so it is an ordinary
    // message (it waits in the main DM lane behind the paused run) and decides nothing
    wa.current.upsert([wa.dm(STRANGER, "1")]);
    await eventually(() => handled.includes(`+${STRANGER}:1`), 500, 20);
    expect((await t.rpc("approvals.list", {})).result.approvals).toHaveLength(1);
    expect((await t.rpc("runs.get", { runId })).result.status).toBe("waiting");
    expect(await targetMessages()).toEqual([]);

    // the owner's "1" in the request's chat allows once
    wa.current.upsert([wa.dm(OWNER, "1")]);
    const done = await t.rpc("agent.wait", { runId, timeoutMs: 10_000 });
    expect(done.result).toMatchObject({ status: "ok" });
    // (the reply follows the main DM session's latest route, which the stranger's message moved)
    await eventually(() => wa.allSent().find((s) => s.text.startsWith("done:")), 500, 20);
    expect(await targetMessages()).toEqual(["wa"]);
    expect((await t.rpc("approvals.list", {})).result).toMatchObject({ approvals: [], always: [] });
    // the stranger's "1" then went to the model as a plain message (its reply goes where the main
    // DM session's route points) and ran no tool
    await eventually(() => wa.allSent().find((s) => s.text === "ok"), 500, 20);
    expect(await targetMessages()).toEqual(["wa"]);
    expect(sentTo(OWNER).filter((s) => s.text.includes("Approval needed"))).toHaveLength(1);
  });
}

describe("approvals on whatsapp (fs store, local queue)", () => approvalsOnWhatsApp("local"));
describeRedis("approvals on whatsapp (redis, bullmq: a worker runs the turn)", () =>
  approvalsOnWhatsApp("bullmq"),
);
