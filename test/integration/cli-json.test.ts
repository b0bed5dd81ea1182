import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pairingStore } from "../../src/routing/pairing.js";
import { cliAgainst, startTestApp, type TestApp } from "../harness.js";

/**
 * API.md §2: "`--json` prints machine-readable output". Every command that reports a result
 * takes `--json` and prints the RPC result as JSON, in process against a listening gateway.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp(
    { models: { default: "s/echo", providers: { s: { kind: "scripted", rules: [] } } } },
    { listen: true },
  );
});
afterAll(() => t?.stop());

const cli = (...args: string[]) => cliAgainst(t, ...args);

describe("--json on the commands that change something", () => {
  it("cron run and cron rm print the RPC result", async () => {
    expect((await cli("cron", "add", "daily", "--message", "hello", "--every", "1d")).code).toBe(0);
    const run = await cli("cron", "run", "daily", "--json");
    expect(run.code).toBe(0);
    const started = JSON.parse(run.out);
    expect(started).toMatchObject({ status: "accepted" });
    expect(typeof started.runId).toBe("string");
    await t.app.services.pipeline.wait(started.runId, 10_000);
    const rm = await cli("cron", "rm", "daily", "--json");
    expect(rm.code).toBe(0);
    expect(JSON.parse(rm.out)).toEqual({ removed: true });
  });

  it("pairing approve and pairing deny print the RPC result", async () => {
    const pairing = pairingStore(t.app.services);
    const a = await pairing.request("telegram", "default", "111");
    const b = await pairing.request("telegram", "default", "222");
    const approved = await cli("pairing", "approve", "telegram", a?.request.code ?? "", "--json");
    expect(approved.code).toBe(0);
    expect(JSON.parse(approved.out)).toEqual({ ok: true, senderId: "111" });
    const denied = await cli("pairing", "deny", "telegram", b?.request.code ?? "", "--json");
    expect(denied.code).toBe(0);
    expect(JSON.parse(denied.out)).toEqual({ ok: true, senderId: "222" });
  });
});
