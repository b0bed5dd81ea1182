import { describe, expect, it } from "vitest";
import { loadSessionContext, type SessionContext } from "../../../src/agent/compaction.js";
import type { TranscriptMessage, TranscriptRef, TranscriptStore } from "../../../src/store/types.js";

/** Transcripts held in arrays; counts the tail reads. */
function store() {
  const files = new Map<string, TranscriptMessage[]>();
  const reads: number[] = [];
  const fake = {
    async readTail(ref: TranscriptRef, opts: { limit: number }) {
      reads.push(opts.limit);
      const all = files.get(ref.sessionId) ?? [];
      return all.slice(Math.max(0, all.length - opts.limit));
    },
  };
  return { files, reads, transcripts: fake as unknown as TranscriptStore };
}

let n = 0;
const message = (sessionId: string): TranscriptMessage => ({
  id: `m${n++}`,
  sessionId,
  role: n % 2 ? "user" : "assistant",
  content: `text ${n}`,
  timestamp: n,
});
const line = (sessionId: string, toId: string): TranscriptMessage => ({
  id: `c${n++}`,
  sessionId,
  role: "compaction",
  content: { summary: "S", fromId: "m0", toId, tokensBefore: 9, tokensAfter: 3 },
  timestamp: n,
});

/** The context as a session nobody read before would get it (a copy of the file under a new id). */
async function fresh(s: ReturnType<typeof store>, sessionId: string, count: number): Promise<SessionContext> {
  const copy = `${sessionId}-copy${n++}`;
  s.files.set(copy, s.files.get(sessionId)!.slice());
  return loadSessionContext(s.transcripts, { agentId: "main", sessionId: copy }, { compactionCount: count });
}

const view = (c: SessionContext) => ({
  compaction: c.compaction,
  ids: c.messages.map((m) => m.id),
  afterLine: c.afterLine,
  truncated: c.truncated,
});

/**
 * A session of `before` messages, a compaction line covering up to message `toIndex`, then
 * `after` messages.
 */
function session(id: string, before: number, toIndex: number, after: number) {
  const s = store();
  const msgs: TranscriptMessage[] = [];
  for (let i = 0; i < before; i++) msgs.push(message(id));
  msgs.push(line(id, msgs[toIndex]!.id));
  for (let i = 0; i < after; i++) msgs.push(message(id));
  s.files.set(id, msgs);
  return { s, msgs, ref: { agentId: "main", sessionId: id } };
}

describe("loadSessionContext: a compaction line further back than the first read", () => {
  it("is found by the wider read once, then served from the first read while nothing says it moved", async () => {
    const id = "s1";
    const { s, msgs, ref } = session(id, 50, 20, 600);

    const first = await loadSessionContext(s.transcripts, ref, { compactionCount: 1 });
    expect(s.reads).toEqual([400, 4000]);
    expect(first.compaction?.summary).toBe("S");
    expect(first.messages).toHaveLength(400);

    s.reads.length = 0;
    for (let round = 0; round < 5; round++) {
      for (let k = 0; k < round * 3; k++) msgs.push(message(id));
      const got = await loadSessionContext(s.transcripts, ref, { compactionCount: 1 });
      expect(view(got)).toEqual(view(await fresh(s, id, 1)));
    }
    // five steps, one read each (the fresh copies read twice each: 400 and 4000)
    expect(s.reads.filter((r) => r === 400)).toHaveLength(10);
    expect(s.reads.filter((r) => r === 4000)).toHaveLength(5);

    // another compaction counted (elsewhere): the memo is not trusted
    s.reads.length = 0;
    await loadSessionContext(s.transcripts, ref, { compactionCount: 2 });
    expect(s.reads).toEqual([400, 4000]);

    // more messages since than one read holds: looked up again
    for (let i = 0; i < 450; i++) msgs.push(message(id));
    s.reads.length = 0;
    const far = await loadSessionContext(s.transcripts, ref, { compactionCount: 2 });
    expect(s.reads).toEqual([400, 4000]);
    expect(view(far)).toEqual(view(await fresh(s, id, 2)));
  });

  it("says truncated exactly when the uncovered messages outnumber the first read", async () => {
    const id = "s2";
    const { s, msgs, ref } = session(id, 10, 9, 400); // the line covers everything before it
    expect((await loadSessionContext(s.transcripts, ref, { compactionCount: 1 })).truncated).toBe(false);
    const again = await loadSessionContext(s.transcripts, ref, { compactionCount: 1 });
    expect(again.truncated).toBe(false);
    expect(again.compaction?.summary).toBe("S");
    msgs.push(message(id));
    const more = await loadSessionContext(s.transcripts, ref, { compactionCount: 1 });
    expect(view(more)).toEqual(view(await fresh(s, id, 1)));
    expect(more.truncated).toBe(true);
  });

  it("a line further back than the wider reads reach is not looked for again on every step", async () => {
    const id = "s3";
    const { s, msgs, ref } = session(id, 1, 0, 4500);
    const first = await loadSessionContext(s.transcripts, ref, { compactionCount: 1 });
    expect(s.reads).toEqual([400, 4000]);
    expect(first.compaction).toBeNull();
    s.reads.length = 0;
    msgs.push(message(id), message(id));
    const next = await loadSessionContext(s.transcripts, ref, { compactionCount: 1 });
    expect(s.reads).toEqual([400]);
    expect(view(next)).toEqual(view(await fresh(s, id, 1)));
  });

  it("a first read holding an unusable compaction line is not served from the memo", async () => {
    const id = "s4";
    const { s, msgs, ref } = session(id, 50, 20, 600);
    await loadSessionContext(s.transcripts, ref, { compactionCount: 1 });
    msgs.push({ ...line(id, "m-none"), content: { summary: 42 } }, message(id)); // a broken line
    s.reads.length = 0;
    const got = await loadSessionContext(s.transcripts, ref, { compactionCount: 1 });
    expect(s.reads).toEqual([400, 4000]);
    expect(view(got)).toEqual(view(await fresh(s, id, 1)));
  });
});
