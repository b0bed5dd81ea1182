import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Journal } from "../../../../src/journal/index.js";
import { silentLogger } from "../../../../src/log.js";
import { createFsStore } from "../../../../src/store/fs/index.js";
import { WarningSink } from "../../../../src/store/warnings.js";
import { tempDir } from "../../../helpers.js";

/**
 * The outbox mark after a platform accepted a message is written in the same synchronous step as
 * `complete` (issue 11): a crash at any later moment finds it on disk, so the message is not
 * re-sent. Other journal writes still share one write(2) per I/O phase.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const lines = (file: string) => readFileSync(file, "utf8").trim().split("\n");

describe("fs outbox mark", () => {
  it("complete() has written the done record before it returns to the caller", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const store = await createFsStore({ stateDir: t.dir, logger: silentLogger() });
    cleanups.push(() => store.close());
    expect(await store.outbox.lease("reply:r1#0", 1000, 60_000)).toMatchObject({ acquired: true });
    await new Promise((r) => setImmediate(r)); // the send
    const done = store.outbox.complete("reply:r1#0", { messageIds: ["m1"] }, 60_000);
    // no await yet: nothing else has run
    const last = JSON.parse(lines(path.join(t.dir, "outbox", "outbox.jsonl")).at(-1)!);
    expect(last).toMatchObject({ op: "set", id: "reply:r1#0", entry: { state: "done", messageIds: ["m1"] } });
    await done;
    expect(await store.outbox.get("reply:r1#0")).toEqual({ state: "done", messageIds: ["m1"] });
  });
});

describe("Journal.appendNow", () => {
  async function open() {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const state: string[] = [];
    const j = await Journal.open<{ v: string }>({
      dir: t.dir,
      name: "j",
      logger: silentLogger(),
      warnings: new WarningSink(silentLogger()),
      compactEveryAppends: 1_000_000,
      decode: (v) => v as { v: string },
      replay: (r) => state.push(r.v),
      snapshot: () => state.map((v) => ({ v })),
      size: () => state.length,
    });
    cleanups.push(() => j.close());
    return { j, state, file: path.join(t.dir, "j.jsonl") };
  }

  it("writes at once, after the appends queued before it (order kept), and applies in that order", async () => {
    const { j, state, file } = await open();
    const a = j.append({ v: "a" }, () => state.push("a"));
    expect(lines(file)).toHaveLength(1); // header only: `append` waits for the end of the phase
    const b = j.appendNow({ v: "b" }, () => state.push("b"));
    expect(
      lines(file)
        .slice(1)
        .map((l) => JSON.parse(l).v),
    ).toEqual(["a", "b"]);
    await Promise.all([a, b]);
    expect(state).toEqual(["a", "b"]);
    const c = j.append({ v: "c" }, () => state.push("c"));
    await c;
    expect(
      lines(file)
        .slice(1)
        .map((l) => JSON.parse(l).v),
    ).toEqual(["a", "b", "c"]);
  });

  it("waits for a log rotation in progress, then lands in the new live log", async () => {
    const { j, state, file } = await open();
    await j.append({ v: "a" }, () => state.push("a"));
    const compaction = j.compact();
    // let the flush loop enter the rotation (it awaits file operations)
    await new Promise((r) => setImmediate(r));
    const b = j.appendNow({ v: "b" }, () => state.push("b"));
    // not written into the log being rotated out (nor anywhere yet)
    const dir = path.dirname(file);
    for (const f of ["j.jsonl", "j.1.jsonl"].map((n) => path.join(dir, n)))
      expect(existsSync(f) ? readFileSync(f, "utf8") : "").not.toContain('"b"');
    await b;
    await compaction;
    expect(state).toEqual(["a", "b"]);
    expect(lines(file).map((l) => JSON.parse(l))).toEqual([{ $log: 2 }, { v: "b" }]);
  });
});
