import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SwitchboardError } from "../../src/errors.js";
import { CleanAppender, repairTornTail, storageError } from "../../src/journal/append.js";
import { silentLogger } from "../../src/log.js";
import { createLocalPipeline, type LocalPipeline } from "../../src/pipeline/local/index.js";
import type { JobHandlers, TurnJob } from "../../src/pipeline/types.js";
import { createFsStore, type FsStore } from "../../src/store/fs/index.js";
import { tempDir } from "../helpers.js";

/**
 * Full disks and torn writes (issue 11): an append that fails part-way leaves no fragment, the
 * caller gets STORAGE_UNAVAILABLE (never an ack for a record not on disk), the same process
 * recovers once space returns, and a kill + restart then runs every acknowledged turn.
 */

describe("the shared append rules, on /dev/full (any user)", () => {
  it("a failed write reaches the caller as STORAGE_UNAVAILABLE naming the cause", () => {
    const fd = openSync("/dev/full", "a");
    try {
      const out = new CleanAppender(fd, 0, "test journal");
      let caught: unknown;
      try {
        out.append('{"a":1}\n');
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(SwitchboardError);
      expect(caught).toMatchObject({
        code: "STORAGE_UNAVAILABLE",
        message: expect.stringContaining("disk is full"),
      });
    } finally {
      closeSync(fd);
    }
    const other = new Error("boom");
    expect(storageError(other, "x")).toBe(other);
  });

  it("repairTornTail cuts a fragment back to the last whole record, and completes a whole one", async () => {
    const t = tempDir();
    try {
      const f = path.join(t.dir, "j.jsonl");
      const fd = openSync(f, "w");
      writeSync(fd, '{"a":1}\n{"b":2}\n{"c":');
      closeSync(fd);
      expect(await repairTornTail(f)).toEqual({ cut: 5, completed: false });
      expect(readFileSync(f, "utf8")).toBe('{"a":1}\n{"b":2}\n');
      const fd2 = openSync(f, "a");
      writeSync(fd2, '{"d":4}');
      closeSync(fd2);
      expect(await repairTornTail(f)).toEqual({ cut: 0, completed: true });
      expect(readFileSync(f, "utf8")).toBe('{"a":1}\n{"b":2}\n{"d":4}\n');
      expect(await repairTornTail(path.join(t.dir, "none"))).toEqual({ cut: 0, completed: false });
    } finally {
      t.cleanup();
    }
  });
});

const isRoot = process.getuid?.() === 0;

describe.runIf(isRoot)("a 2 MB tmpfs state dir that fills up mid-append (root)", () => {
  let dir = "";
  let mounted = false;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "sb-full-"));
    const r = spawnSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dir]);
    mounted = r.status === 0;
    if (!mounted) throw new Error(`mount tmpfs failed: ${String(r.stderr)}`);
  });
  afterAll(() => {
    if (mounted) spawnSync("umount", ["-l", dir]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses with STORAGE_UNAVAILABLE, leaves whole lines only, recovers without restart, and a restart runs every acked turn", async () => {
    const stateDir = path.join(dir, "state");
    let store: FsStore = await createFsStore({ stateDir, logger: silentLogger() });
    const make = (s: FsStore): LocalPipeline =>
      createLocalPipeline({
        stateDir,
        runs: s.runs,
        logger: silentLogger(),
        concurrency: 4,
        mode: "followup",
      });
    const first = make(store);
    // fill the disk, leaving a little room: the 14 KB requests below fail part-way
    const filler = path.join(dir, "filler");
    const fd = openSync(filler, "w");
    const block = Buffer.alloc(64 * 1024, 1);
    let written = 0;
    for (let i = 0; i < 64; i++) {
      try {
        written += writeSync(fd, block);
      } catch {
        break; // ENOSPC: the disk is full
      }
    }
    closeSync(fd);
    spawnSync("truncate", ["-s", String(Math.max(0, written - 40 * 1024)), filler]);

    const text = "x".repeat(14 * 1024);
    const acked: string[] = [];
    let refusal: unknown = null;
    for (let i = 0; i < 100 && refusal === null; i++) {
      try {
        const rec = await first.submitTurn({
          sessionKey: `agent:main:s${i}`,
          agentId: "main",
          text,
          deliver: false,
          origin: "inbound",
        });
        acked.push(rec.runId);
      } catch (err) {
        refusal = err;
      }
    }
    expect(refusal).toMatchObject({ code: "STORAGE_UNAVAILABLE" });
    expect(acked.length).toBeGreaterThan(0);

    // space returns: the same process accepts again, no restart
    unlinkSync(filler);
    const after = await first.submitTurn({
      sessionKey: "agent:main:after",
      agentId: "main",
      text: "after the disk was freed",
      deliver: false,
      origin: "inbound",
    });
    acked.push(after.runId);

    // every line of the queue journal and of runs.jsonl is one whole record
    for (const f of [
      path.join(stateDir, "queue", "journal.jsonl"),
      path.join(stateDir, "runs", "runs.jsonl"),
    ]) {
      const lines = readFileSync(f, "utf8").split("\n");
      expect(lines.at(-1)).toBe("");
      for (const l of lines.slice(0, -1)) expect(() => JSON.parse(l)).not.toThrow();
    }

    // "kill" (nothing flushed or closed on purpose) and restart: every acked turn runs
    await store.close();
    store = await createFsStore({ stateDir, logger: silentLogger() });
    const second = make(store);
    const ran = new Set<string>();
    const handlers: JobHandlers = {
      async turn(job: TurnJob) {
        for (const m of job.messages) ran.add(m.runId);
        return { status: "ok", reply: "done" };
      },
      async background() {},
    };
    await second.start(handlers);
    for (const id of acked) expect((await second.wait(id, 10_000))?.status).toBe("ok");
    expect(acked.every((id) => ran.has(id))).toBe(true);
    await second.stop(100);
    await first.stop(100).catch(() => {});
    await store.close();
  });
});
