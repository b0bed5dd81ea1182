import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../../src/log.js";
import { createLocalPipeline } from "../../../../src/pipeline/local/index.js";
import type { TurnRequest } from "../../../../src/pipeline/types.js";
import { queuedRecord } from "../../../../src/pipeline/types.js";
import { createFsStore } from "../../../../src/store/fs/index.js";
import { tempDir } from "../../../helpers.js";

/**
 * A crash in the middle of accepting a turn with an explicit run id (issue 11; found by the chaos
 * run as a sub-agent "announced 0×" whose run stayed queued): the run record and the queue
 * journal record are written side by side, so a SIGKILL can leave the run record ("queued") on
 * disk without the journal record. The re-run of the caller submits the same run id again
 * (sessions_spawn does) — that submit must accept the turn, not answer with the orphaned record.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("local pipeline: a torn accept, then the same run id again", () => {
  it("a queued run record the journal does not know is accepted again and runs once", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const store = await createFsStore({ stateDir: t.dir, logger: silentLogger() });
    cleanups.push(() => store.close());
    const req: TurnRequest = {
      sessionKey: "agent:main:subagent:child",
      agentId: "main",
      text: "child task",
      deliver: false,
      origin: "spawn",
      runId: "child-run-1",
    };
    // what the dead process left: the run record, but no journal record
    await store.runs.put(queuedRecord("child-run-1", req, Date.now()));

    const pipeline = createLocalPipeline({
      stateDir: t.dir,
      runs: store.runs,
      logger: silentLogger(),
      concurrency: 2,
      mode: "followup",
    });
    const ran: string[] = [];
    await pipeline.start({
      async turn(job) {
        for (const m of job.messages) ran.push(m.runId);
        return { status: "ok", reply: "done" };
      },
      async background() {},
    });
    cleanups.push(() => pipeline.stop(100));
    const rec = await pipeline.submitTurn(req);
    expect(rec.runId).toBe("child-run-1");
    expect(await pipeline.wait("child-run-1", 5_000)).toMatchObject({ status: "ok", reply: "done" });
    // and a further submit of the same id is the usual no-op
    expect(await pipeline.submitTurn(req)).toMatchObject({ runId: "child-run-1", status: "ok" });
    expect(ran).toEqual(["child-run-1"]);
  });
});
