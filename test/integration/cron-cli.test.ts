import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliAgainst, startTestApp, type TestApp } from "../harness.js";

/** `switchboard cron …` in process against a listening gateway. */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp(
    {
      models: {
        default: "s/echo",
        providers: {
          s: { kind: "scripted", rules: [{ match: { contains: "report" }, reply: "the report" }] },
        },
      },
    },
    { listen: true },
  );
});
afterAll(() => t?.stop());

const cli = (...args: string[]) => cliAgainst(t, ...args);

describe("switchboard cron", () => {
  it("add, list, show, edit, run, runs, rm", async () => {
    const add = await cli(
      "cron",
      "add",
      "nightly",
      "--message",
      "report",
      "--cron",
      "0 3 * * *",
      "--tz",
      "Europe/Berlin",
    );
    expect(add.code).toBe(0);
    expect(add.out).toContain("added nightly");
    const bad = await cli("cron", "add", "broken", "--message", "x", "--every", "soon");
    expect(bad.code).toBe(1);
    expect(bad.err).toContain("job.schedule.every");

    const list = await cli("cron", "list");
    expect(list.out).toMatch(/nightly\s+on\s+next 20\d\d-/);
    const json = JSON.parse((await cli("cron", "list", "--json")).out);
    expect(json.jobs[0]).toMatchObject({
      id: "nightly",
      schedule: { cron: "0 3 * * *", tz: "Europe/Berlin" },
    });

    expect((await cli("cron", "show", "nightly")).out).toContain('cron "0 3 * * *" Europe/Berlin');
    expect((await cli("cron", "show", "ghost")).code).toBe(1);

    const edit = await cli("cron", "edit", "nightly", "--every", "2h", "--disable");
    expect(edit.code).toBe(0);
    expect(JSON.parse((await cli("cron", "show", "nightly", "--json")).out)).toMatchObject({
      schedule: { every: "2h" },
      enabled: false,
      nextRunAt: null,
    });

    const run = await cli("cron", "run", "nightly");
    const runId = /run (cron-nightly-manual-[0-9a-f-]+)/.exec(run.out)?.[1] ?? "";
    expect(runId).not.toBe("");
    await t.app.services.pipeline.wait(runId, 10_000);
    // The run log line is written after the turn, before the run is final.
    const runs = await cli("cron", "runs", "nightly");
    expect(runs.out).toMatch(/ok\s+\d+ms\s+the report/);

    expect((await cli("cron", "rm", "nightly")).out).toContain("removed nightly");
    expect((await cli("cron", "list")).out).toBe("no cron jobs");
  });
});
