import { describe, expect, it } from "vitest";
import { type IndexedSession, SessionIndex, sessionIdHash } from "../../../../src/store/fs/session-index.js";
import { defaultClassifyKind } from "../../../../src/store/kind.js";
import type { ListSessionsQuery, SessionEntry, SessionKind } from "../../../../src/store/types.js";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const NOW = 1_700_000_000_000;
const AGENTS = ["a", "b", "c"];
const KINDS: SessionKind[] = ["main", "group", "cron", "hook", "node", "other"];

/** The obvious implementation the index must agree with. */
function reference(entries: Iterable<SessionEntry>, q: ListSessionsQuery): string[] {
  const kinds = q.kinds && q.kinds.length > 0 ? new Set(q.kinds) : null;
  const cutoff = q.activeMinutes === undefined ? Number.NEGATIVE_INFINITY : NOW - q.activeMinutes * 60_000;
  const s = q.search?.toLowerCase();
  return [...entries]
    .filter(
      (e) =>
        (q.agentId === undefined || e.agentId === q.agentId) &&
        (q.label === undefined || e.label === q.label) &&
        (q.spawnedBy === undefined || e.spawnedBy === q.spawnedBy) &&
        (q.includeArchived === true || e.archivedAt === undefined) &&
        e.updatedAt >= cutoff &&
        (kinds === null || kinds.has(defaultClassifyKind(e.key))) &&
        (!s || [e.key, e.label, e.displayName].some((f) => f?.toLowerCase().includes(s))),
    )
    .sort((x, y) => y.updatedAt - x.updatedAt || (x.key < y.key ? 1 : x.key > y.key ? -1 : 0))
    .slice(0, q.limit ?? 50)
    .map((e) => e.key);
}

function randomEntry(rand: () => number, i: number): SessionEntry {
  const agentId = AGENTS[Math.floor(rand() * AGENTS.length)]!;
  const shapes = [
    `agent:${agentId}:main`,
    `agent:${agentId}:telegram:group:${i}`,
    `cron:job${i}`,
    `agent:${agentId}:hook:${i}`,
    `node-${i}`,
    `agent:${agentId}:direct:u${i}`,
  ];
  const e: SessionEntry = {
    key: shapes[Math.floor(rand() * shapes.length)]!.replace(":main", i % 7 === 0 ? ":main" : `:x${i}`),
    sessionId: `s${i}-${Math.floor(rand() * 1e9)}`,
    agentId,
    createdAt: NOW,
    updatedAt: NOW - Math.floor(rand() * 120) * 60_000, // ties on purpose
  };
  if (rand() < 0.3) e.label = `L${Math.floor(rand() * 4)}`;
  if (rand() < 0.3) e.spawnedBy = `p${Math.floor(rand() * 3)}`;
  if (rand() < 0.2) e.archivedAt = NOW;
  if (rand() < 0.5) e.displayName = `Name ${i} ${rand() < 0.5 ? "Alpha" : "beta"}`;
  return e;
}

/** What the index holds of an entry (the store keeps the rest on disk). */
function indexed(e: SessionEntry): IndexedSession & { sessionId: string } {
  return {
    key: e.key,
    sid: sessionIdHash(e.sessionId),
    sessionId: e.sessionId,
    agentId: e.agentId,
    updatedAt: e.updatedAt,
    archived: e.archivedAt !== undefined,
    label: e.label,
    spawnedBy: e.spawnedBy,
    displayName: e.displayName,
  };
}

function randomQuery(rand: () => number): ListSessionsQuery {
  const q: ListSessionsQuery = { limit: 1 + Math.floor(rand() * 40) };
  if (rand() < 0.4) q.agentId = AGENTS[Math.floor(rand() * (AGENTS.length + 1))] ?? "nobody";
  if (rand() < 0.4) q.kinds = KINDS.filter(() => rand() < 0.3);
  if (rand() < 0.15) q.label = `L${Math.floor(rand() * 5)}`;
  if (rand() < 0.15) q.spawnedBy = `p${Math.floor(rand() * 4)}`;
  if (rand() < 0.3) q.includeArchived = true;
  if (rand() < 0.2) q.activeMinutes = Math.floor(rand() * 100);
  if (rand() < 0.15) q.search = rand() < 0.5 ? "ALPHA" : "group";
  return q;
}

describe("SessionIndex", () => {
  // the lookups by sessionId/label/spawnedBy are built after the open: on first use ("lazy"), or
  // in small background slices that changes and queries interleave with ("background")
  it.each(["lazy", "background"] as const)(
    "agrees with a reference filter/sort through random changes and queries (lookups %s)",
    async (mode) => {
      const rand = rng(7);
      const index = new SessionIndex<ReturnType<typeof indexed>>(defaultClassifyKind);
      const model = new Map<string, SessionEntry>();
      // a loaded part (bulk build) then live changes
      for (let i = 0; i < 300; i++) {
        const e = randomEntry(rand, i);
        index.set(indexed(e));
        model.set(e.key, e);
      }
      index.build();
      if (mode === "background") index.buildLookupsInBackground(7);
      for (let step = 0; step < 3000; step++) {
        if (mode === "background" && step % 3 === 0) await new Promise((r) => setImmediate(r));
        const r = rand();
        const keys = [...model.keys()];
        if (r < 0.15 && keys.length > 0) {
          const k = keys[Math.floor(rand() * keys.length)]!;
          expect(index.remove(k)).toBe(true);
          model.delete(k);
        } else if (r < 0.6 && keys.length > 0) {
          // replace an existing entry: new time, maybe archived/unarchived, maybe another agent
          const old = model.get(keys[Math.floor(rand() * keys.length)]!)!;
          const next = { ...randomEntry(rand, step + 1000), key: old.key };
          index.set(indexed(next));
          model.set(next.key, next);
        } else {
          const e = randomEntry(rand, step + 1000);
          index.set(indexed(e));
          model.set(e.key, e);
        }
        if (step % 10 === 0) {
          const q = randomQuery(rand);
          expect(
            index.list(q, NOW).map((e) => e.key),
            JSON.stringify(q),
          ).toEqual(reference(model.values(), q));
        }
      }
      expect(index.size).toBe(model.size);
      for (const e of model.values()) {
        expect(index.candidatesBySessionId(e.sessionId).map((x) => x.key)).toContain(e.key);
      }
      // no lookup still holds an entry that was replaced or removed
      for (const e of model.values()) {
        for (const c of index.candidatesBySessionId(e.sessionId))
          expect(model.get(c.key)?.sessionId).toBe(c.sessionId);
      }
      const parents = new Set([...model.values()].flatMap((e) => (e.spawnedBy ? [e.spawnedBy] : [])));
      for (const p of parents) {
        const q = { spawnedBy: p, includeArchived: true, limit: 1e9 };
        expect(index.list(q, NOW).map((e) => e.key)).toEqual(reference(model.values(), q));
      }
      const labels = new Set([...model.values()].flatMap((e) => (e.label ? [e.label] : [])));
      for (const l of labels) {
        expect(index.findByLabel(l).map((e) => e.key)).toEqual(
          reference(model.values(), { label: l, includeArchived: true, limit: 1e9 }),
        );
      }
      expect(
        index
          .entries()
          .map((e) => e.key)
          .sort(),
      ).toEqual([...model.keys()].sort());
    },
  );
});
