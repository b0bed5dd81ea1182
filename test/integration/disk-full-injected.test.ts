import { readFileSync, writeSync } from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { silentLogger } from "../../src/log.js";
import { createLocalPipeline, type LocalPipeline } from "../../src/pipeline/local/index.js";
import type { JobHandlers, TurnJob } from "../../src/pipeline/types.js";
import { createFsStore, type FsStore } from "../../src/store/fs/index.js";
import { tempDir } from "../helpers.js";

/**
 * ENOSPC in the middle of an append, for any user (issue 11; disk-full.test.ts does it on a real
 * tmpfs when run as root): the journals' synchronous append is made to write part of a record
 * and then fail as a full disk would. The caller is refused with STORAGE_UNAVAILABLE, no
 * fragment stays in the file, the same process accepts again, and after a kill + restart every
 * acknowledged turn runs.
 */

const fault = vi.hoisted(() => ({ match: null as string | null, bytes: 0, hits: 0 }));
vi.mock("../../src/journal/fsutil.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../src/journal/fsutil.js")>();
  return {
    ...real,
    appendSync(fd: number, text: string): number {
      if (fault.match !== null && text.includes(fault.match)) {
        fault.match = null;
        fault.hits++;
        const buf = Buffer.from(text, "utf8");
        writeSync(fd, buf, 0, Math.min(fault.bytes, buf.length)); // part of the record reached the disk
        throw Object.assign(new Error("ENOSPC: no space left on device, write"), {
          code: "ENOSPC",
          errno: -28,
          syscall: "write",
        });
      }
      return real.appendSync(fd, text);
    },
  };
});

describe("ENOSPC mid-append (injected), then a restart", () => {
  it("refuses with STORAGE_UNAVAILABLE, leaves whole lines only, accepts again at once, and a restart runs every acked turn", async () => {
    const t = tempDir();
    const stateDir = path.join(t.dir, "state");
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
    const submit = (p: LocalPipeline, text: string) =>
      p.submitTurn({
        sessionKey: "agent:main:disk",
        agentId: "main",
        text,
        deliver: false,
        origin: "inbound",
      });
    try {
      const acked = [(await submit(first, "before")).runId];
      fault.match = "torn-me";
      fault.bytes = 25;
      await expect(submit(first, "torn-me")).rejects.toMatchObject({ code: "STORAGE_UNAVAILABLE" });
      expect(fault.hits).toBe(1);
      // the same process accepts again, no restart
      acked.push((await submit(first, "after")).runId);
      for (const f of [
        path.join(stateDir, "queue", "journal.jsonl"),
        path.join(stateDir, "runs", "runs.jsonl"),
      ]) {
        const lines = readFileSync(f, "utf8").split("\n");
        expect(lines.at(-1)).toBe("");
        for (const l of lines.slice(0, -1)) expect(() => JSON.parse(l)).not.toThrow();
        expect(readFileSync(f, "utf8")).not.toContain("torn-me");
      }

      // "kill" (nothing stopped or flushed on purpose) and restart: every acked turn runs, once
      await store.close();
      store = await createFsStore({ stateDir, logger: silentLogger() });
      const second = make(store);
      const ran: string[] = [];
      const handlers: JobHandlers = {
        async turn(job: TurnJob) {
          for (const m of job.messages) ran.push(m.text);
          return { status: "ok", reply: "done" };
        },
        async background() {},
      };
      await second.start(handlers);
      for (const id of acked) expect((await second.wait(id, 10_000))?.status).toBe("ok");
      expect(ran).toEqual(["before", "after"]);
      await second.stop(100);
      await first.stop(100).catch(() => {});
    } finally {
      await store.close();
      t.cleanup();
    }
  });
});
