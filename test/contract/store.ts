/**
 * The store contract: every StoreDriver (fs, redis) runs this suite. Driver-agnostic — it
 * uses only the StoreDriver interface; `make` must return a fresh, empty, isolated driver and
 * a cleanup that closes it and removes its data. Kinds use the SEMANTICS §1 key rule.
 */
import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type {
  RunRecord,
  SessionEntry,
  StoreDriver,
  TranscriptMessage,
  TranscriptRef,
} from "../../src/store/types.js";

export type StoreFactory = () => Promise<{ driver: StoreDriver; cleanup: () => Promise<void> }>;

const MIN = 60_000;

export function storeContract(name: string, make: StoreFactory): void {
  describe(`store contract: ${name}`, () => {
    let driver: StoreDriver;
    let cleanup: () => Promise<void>;

    beforeEach(async () => {
      ({ driver, cleanup } = await make());
    });
    afterEach(async () => {
      await cleanup();
    });

    const T0 = 1_700_000_000_000;
    function entry(key: string, over: Partial<SessionEntry> = {}): SessionEntry {
      return { key, sessionId: randomUUID(), agentId: "main", createdAt: T0, updatedAt: T0, ...over };
    }

    describe("sessions: CRUD", () => {
      it("get of an absent key is null; put then get returns the entry", async () => {
        expect(await driver.sessions.get("agent:main:main")).toBeNull();
        const e = entry("agent:main:main", {
          displayName: "Alice",
          deliveryContext: { channel: "telegram", to: "42", accountId: "default" },
          subagent: {
            task: "t",
            runId: "r1",
            mode: "run",
            cleanup: "keep",
            runTimeoutSeconds: 0,
            sandboxed: false,
          },
        });
        await driver.sessions.put(e);
        expect(await driver.sessions.get("agent:main:main")).toEqual(e);
      });

      it("put replaces the entry whole", async () => {
        await driver.sessions.put(entry("k1", { label: "old", displayName: "D" }));
        const next = entry("k1", { label: "new" });
        await driver.sessions.put(next);
        const got = await driver.sessions.get("k1");
        expect(got).toEqual(next);
        expect(got).not.toHaveProperty("displayName");
      });

      it("returns copies: mutating a result does not change the store", async () => {
        await driver.sessions.put(entry("k1", { deliveryContext: { channel: "slack", to: "C1" } }));
        const got = (await driver.sessions.get("k1"))!;
        got.label = "mutated";
        got.deliveryContext!.to = "mutated";
        const again = (await driver.sessions.get("k1"))!;
        expect(again.label).toBeUndefined();
        expect(again.deliveryContext?.to).toBe("C1");
        const listed = await driver.sessions.list({});
        listed[0]!.displayName = "mutated";
        expect((await driver.sessions.get("k1"))!.displayName).toBeUndefined();
      });

      it("patch merges shallowly and undefined deletes a field; absent key gives null", async () => {
        await driver.sessions.put(entry("k1", { label: "L", model: "openai/gpt-4.1", totalTokens: 5 }));
        const patched = await driver.sessions.patch("k1", {
          model: undefined,
          totalTokens: 9,
          sendPolicy: "deny",
        });
        expect(patched).toMatchObject({ key: "k1", label: "L", totalTokens: 9, sendPolicy: "deny" });
        expect(patched).not.toHaveProperty("model");
        const got = await driver.sessions.get("k1");
        expect(got).toEqual(patched);
        expect(got).not.toHaveProperty("model");
        expect(await driver.sessions.patch("absent", { label: "x" })).toBeNull();
        expect(await driver.sessions.get("absent")).toBeNull();
      });

      it("delete reports whether something was deleted and removes every lookup", async () => {
        const e = entry("k1", { label: "lab" });
        await driver.sessions.put(e);
        expect(await driver.sessions.delete("k1")).toBe(true);
        expect(await driver.sessions.delete("k1")).toBe(false);
        expect(await driver.sessions.get("k1")).toBeNull();
        expect(await driver.sessions.getBySessionId(e.sessionId)).toBeNull();
        expect(await driver.sessions.findByLabel("lab")).toEqual([]);
        expect(await driver.sessions.list({})).toEqual([]);
        expect(await driver.sessions.count()).toBe(0);
      });

      it("count counts every entry", async () => {
        expect(await driver.sessions.count()).toBe(0);
        for (let i = 0; i < 5; i++) await driver.sessions.put(entry(`k${i}`));
        await driver.sessions.put(entry("k0", { label: "again" }));
        expect(await driver.sessions.count()).toBe(5);
      });
    });

    describe("sessions: update", () => {
      it("creates from null, returns the stored result, and null leaves the entry unchanged", async () => {
        const created = await driver.sessions.update("k1", (cur) => {
          expect(cur).toBeNull();
          return entry("k1", { totalTokens: 1 });
        });
        expect(created).toMatchObject({ key: "k1", totalTokens: 1 });
        expect(await driver.sessions.get("k1")).toEqual(created);
        const unchanged = await driver.sessions.update("k1", () => null);
        expect(unchanged).toEqual(created);
        expect(await driver.sessions.update("absent", () => null)).toBeNull();
        expect(await driver.sessions.get("absent")).toBeNull();
      });

      it("is atomic under concurrency: 50 concurrent increments all land", async () => {
        await driver.sessions.put(entry("k1", { totalTokens: 0 }));
        await Promise.all(
          Array.from({ length: 50 }, () =>
            driver.sessions.update("k1", (cur) => ({ ...cur!, totalTokens: (cur!.totalTokens ?? 0) + 1 })),
          ),
        );
        expect((await driver.sessions.get("k1"))!.totalTokens).toBe(50);
      });

      it("serialises with concurrent patches on the same key", async () => {
        await driver.sessions.put(entry("k1", { inputTokens: 0, outputTokens: 0 }));
        const ops: Array<Promise<unknown>> = [];
        for (let i = 0; i < 20; i++) {
          ops.push(
            driver.sessions.update("k1", (cur) => ({ ...cur!, inputTokens: (cur!.inputTokens ?? 0) + 1 })),
          );
          ops.push(driver.sessions.patch("k1", { label: `l${i}` }));
        }
        await Promise.all(ops);
        const got = (await driver.sessions.get("k1"))!;
        expect(got.inputTokens).toBe(20);
        expect(got.label).toBe("l19");
      });

      it("a throwing update changes nothing and does not block the key", async () => {
        await driver.sessions.put(entry("k1", { totalTokens: 3 }));
        await expect(
          driver.sessions.update("k1", () => {
            throw new Error("boom");
          }),
        ).rejects.toThrow("boom");
        expect((await driver.sessions.get("k1"))!.totalTokens).toBe(3);
        await driver.sessions.patch("k1", { totalTokens: 4 });
        expect((await driver.sessions.get("k1"))!.totalTokens).toBe(4);
      });
    });

    describe("sessions: lookups", () => {
      it("getBySessionId follows a sessionId change", async () => {
        const e = entry("k1");
        await driver.sessions.put(e);
        expect((await driver.sessions.getBySessionId(e.sessionId))?.key).toBe("k1");
        const newId = randomUUID();
        await driver.sessions.patch("k1", { sessionId: newId });
        expect(await driver.sessions.getBySessionId(e.sessionId)).toBeNull();
        expect((await driver.sessions.getBySessionId(newId))?.key).toBe("k1");
        expect(await driver.sessions.getBySessionId(randomUUID())).toBeNull();
      });

      it("findByLabel matches exactly, optionally per agent, newest first, and follows label changes", async () => {
        await driver.sessions.put(entry("a1", { label: "worker", updatedAt: T0 + 1 }));
        await driver.sessions.put(entry("a2", { label: "worker", updatedAt: T0 + 3 }));
        await driver.sessions.put(entry("b1", { label: "worker", agentId: "other", updatedAt: T0 + 2 }));
        await driver.sessions.put(entry("c1", { label: "worker-2" }));
        await driver.sessions.put(entry("c2", { label: "Worker" }));
        expect((await driver.sessions.findByLabel("worker")).map((e) => e.key)).toEqual(["a2", "b1", "a1"]);
        expect((await driver.sessions.findByLabel("worker", "main")).map((e) => e.key)).toEqual(["a2", "a1"]);
        expect(await driver.sessions.findByLabel("work")).toEqual([]);
        await driver.sessions.patch("a2", { label: "renamed" });
        expect((await driver.sessions.findByLabel("worker", "main")).map((e) => e.key)).toEqual(["a1"]);
        expect((await driver.sessions.findByLabel("renamed")).map((e) => e.key)).toEqual(["a2"]);
      });
    });

    describe("sessions: list", () => {
      it("orders newest-updated first and re-orders after an update", async () => {
        for (let i = 0; i < 5; i++) await driver.sessions.put(entry(`k${i}`, { updatedAt: T0 + i }));
        expect((await driver.sessions.list({})).map((e) => e.key)).toEqual(["k4", "k3", "k2", "k1", "k0"]);
        await driver.sessions.patch("k1", { updatedAt: T0 + 100 });
        await driver.sessions.patch("k4", { updatedAt: T0 - 1 });
        expect((await driver.sessions.list({})).map((e) => e.key)).toEqual(["k1", "k3", "k2", "k0", "k4"]);
      });

      it("applies limit (default 50)", async () => {
        await Promise.all(
          Array.from({ length: 60 }, (_, i) => driver.sessions.put(entry(`k${i}`, { updatedAt: T0 + i }))),
        );
        const all = await driver.sessions.list({});
        expect(all).toHaveLength(50);
        expect(all[0]!.key).toBe("k59");
        expect(all[49]!.key).toBe("k10");
        const three = await driver.sessions.list({ limit: 3 });
        expect(three.map((e) => e.key)).toEqual(["k59", "k58", "k57"]);
        expect(await driver.sessions.list({ limit: 200 })).toHaveLength(60);
      });

      it("filters by agentId across agents", async () => {
        await driver.sessions.put(entry("agent:main:main", { updatedAt: T0 + 1 }));
        await driver.sessions.put(entry("agent:research:main", { agentId: "research", updatedAt: T0 + 2 }));
        await driver.sessions.put(entry("agent:main:x", { updatedAt: T0 + 3 }));
        expect((await driver.sessions.list({ agentId: "main" })).map((e) => e.key)).toEqual([
          "agent:main:x",
          "agent:main:main",
        ]);
        expect((await driver.sessions.list({ agentId: "research" })).map((e) => e.key)).toEqual([
          "agent:research:main",
        ]);
        expect(await driver.sessions.list({ agentId: "nobody" })).toEqual([]);
        expect(await driver.sessions.list({})).toHaveLength(3);
      });

      it("moves an entry between agents when its agentId changes", async () => {
        await driver.sessions.put(entry("k1"));
        await driver.sessions.patch("k1", { agentId: "research" });
        expect(await driver.sessions.list({ agentId: "main" })).toEqual([]);
        expect((await driver.sessions.list({ agentId: "research" })).map((e) => e.key)).toEqual(["k1"]);
      });

      it("filters by kinds (SEMANTICS §1 key rule)", async () => {
        const keys = {
          main: "agent:main:main",
          group: "agent:main:telegram:group:-100",
          channel: "agent:main:slack:channel:c1",
          cron: "cron:nightly",
          scopedCron: "agent:main:cron:weekly",
          hook: "hook:abc",
          node: "node-n1",
          dm: "agent:main:direct:alice",
          sub: `agent:main:subagent:${randomUUID()}`,
        };
        let t = T0;
        for (const k of Object.values(keys)) await driver.sessions.put(entry(k, { updatedAt: t++ }));
        const kinds = async (ks: Array<"main" | "group" | "cron" | "hook" | "node" | "other">) =>
          (await driver.sessions.list({ kinds: ks })).map((e) => e.key).sort();
        expect(await kinds(["main"])).toEqual([keys.main]);
        expect(await kinds(["group"])).toEqual([keys.group, keys.channel].sort());
        expect(await kinds(["cron"])).toEqual([keys.cron, keys.scopedCron].sort());
        expect(await kinds(["hook", "node"])).toEqual([keys.hook, keys.node].sort());
        expect(await kinds(["other"])).toEqual([keys.dm, keys.sub].sort());
        expect(await kinds([])).toHaveLength(Object.keys(keys).length);
      });

      it("filters by label exactly and by spawnedBy", async () => {
        await driver.sessions.put(entry("p", { updatedAt: T0 }));
        await driver.sessions.put(entry("c1", { spawnedBy: "p", label: "a", updatedAt: T0 + 1 }));
        await driver.sessions.put(entry("c2", { spawnedBy: "p", label: "b", updatedAt: T0 + 2 }));
        await driver.sessions.put(entry("c3", { spawnedBy: "q", label: "a", updatedAt: T0 + 3 }));
        expect((await driver.sessions.list({ spawnedBy: "p" })).map((e) => e.key)).toEqual(["c2", "c1"]);
        expect((await driver.sessions.list({ label: "a" })).map((e) => e.key)).toEqual(["c3", "c1"]);
        expect((await driver.sessions.list({ label: "a", spawnedBy: "p" })).map((e) => e.key)).toEqual([
          "c1",
        ]);
        expect((await driver.sessions.list({ spawnedBy: "p", limit: 1 })).map((e) => e.key)).toEqual(["c2"]);
        expect(await driver.sessions.list({ label: "A" })).toEqual([]);
        expect(await driver.sessions.list({ spawnedBy: "nobody" })).toEqual([]);
      });

      it("filters by activeMinutes against the current time", async () => {
        const now = Date.now();
        await driver.sessions.put(entry("old", { updatedAt: now - 120 * MIN }));
        await driver.sessions.put(entry("recent", { updatedAt: now - 2 * MIN }));
        await driver.sessions.put(entry("mid", { updatedAt: now - 30 * MIN }));
        expect((await driver.sessions.list({ activeMinutes: 10 })).map((e) => e.key)).toEqual(["recent"]);
        expect((await driver.sessions.list({ activeMinutes: 60 })).map((e) => e.key)).toEqual([
          "recent",
          "mid",
        ]);
        expect(await driver.sessions.list({ activeMinutes: 1 })).toEqual([]);
      });

      it("searches key, label and displayName case-insensitively", async () => {
        await driver.sessions.put(entry("agent:main:telegram:group:ALPHA", { updatedAt: T0 + 1 }));
        await driver.sessions.put(entry("k2", { label: "Alphabet", updatedAt: T0 + 2 }));
        await driver.sessions.put(entry("k3", { displayName: "The alpha team", updatedAt: T0 + 3 }));
        await driver.sessions.put(entry("k4", { displayName: "beta", updatedAt: T0 + 4 }));
        expect((await driver.sessions.list({ search: "aLpHa" })).map((e) => e.key)).toEqual([
          "k3",
          "k2",
          "agent:main:telegram:group:ALPHA",
        ]);
        expect(await driver.sessions.list({ search: "gamma" })).toEqual([]);
      });

      it("excludes archived entries unless includeArchived", async () => {
        await driver.sessions.put(entry("live", { updatedAt: T0 + 1 }));
        await driver.sessions.put(entry("gone", { updatedAt: T0 + 2, archivedAt: T0 + 5 }));
        expect((await driver.sessions.list({})).map((e) => e.key)).toEqual(["live"]);
        expect((await driver.sessions.list({ includeArchived: true })).map((e) => e.key)).toEqual([
          "gone",
          "live",
        ]);
        await driver.sessions.patch("gone", { archivedAt: undefined });
        expect((await driver.sessions.list({})).map((e) => e.key)).toEqual(["gone", "live"]);
      });

      it("combines filters with the limit applied after filtering", async () => {
        for (let i = 0; i < 30; i++) {
          await driver.sessions.put(
            entry(i % 3 === 0 ? `agent:main:telegram:group:${i}` : `agent:main:direct:u${i}`, {
              updatedAt: T0 + i,
              agentId: i % 2 === 0 ? "main" : "other",
            }),
          );
        }
        const rows = await driver.sessions.list({ agentId: "main", kinds: ["group"], limit: 3 });
        expect(rows.map((e) => e.key)).toEqual([
          "agent:main:telegram:group:24",
          "agent:main:telegram:group:18",
          "agent:main:telegram:group:12",
        ]);
      });
    });

    describe("transcripts", () => {
      const ref: TranscriptRef = { agentId: "main", sessionId: randomUUID() };
      let seq = 0;
      function msg(role: TranscriptMessage["role"], content: unknown, over: Partial<TranscriptMessage> = {}) {
        seq++;
        return { id: `m${seq}`, sessionId: ref.sessionId, role, content, timestamp: T0 + seq, ...over };
      }

      it("an unknown transcript reads as empty with count 0", async () => {
        expect(await driver.transcripts.readTail(ref, { limit: 10 })).toEqual([]);
        expect(await driver.transcripts.count(ref)).toBe(0);
      });

      it("reads the last `limit` messages oldest first, and round-trips every field", async () => {
        const all = [
          msg("user", "hello", { provenance: { kind: "external_user", channel: "telegram", senderId: "1" } }),
          msg("assistant", "hi", {
            usage: { input: 3, output: 4, cost: 0.01 },
            runId: "r1",
            model: "openai/x",
          }),
          msg("user", "q2"),
          msg("assistant", { text: "structured", parts: [1, 2] }),
        ];
        for (const m of all) await driver.transcripts.append(ref, m);
        expect(await driver.transcripts.readTail(ref, { limit: 2 })).toEqual(all.slice(2));
        expect(await driver.transcripts.readTail(ref, { limit: 100 })).toEqual(all);
        expect(await driver.transcripts.readTail(ref, { limit: 0 })).toEqual([]);
      });

      it("readHead reads the first messages only, within its byte bound", async () => {
        expect(await driver.transcripts.readHead(ref, { limit: 3 })).toEqual([]);
        const all = Array.from({ length: 50 }, (_, i) =>
          msg(i % 2 ? "assistant" : "user", `m-${i} ${"x".repeat(200)}`),
        );
        for (const m of all) await driver.transcripts.append(ref, m);
        expect(await driver.transcripts.readHead(ref, { limit: 3 })).toEqual(all.slice(0, 3));
        expect(await driver.transcripts.readHead(ref, { limit: 0 })).toEqual([]);
        // 1 KiB holds a few ~300-byte lines, never a cut one.
        const bounded = await driver.transcripts.readHead(ref, { limit: 50, maxBytes: 1024 });
        expect(bounded.length).toBeGreaterThan(0);
        expect(bounded.length).toBeLessThan(5);
        expect(bounded).toEqual(all.slice(0, bounded.length));
      });

      it("archive with a given time lands where archivedLocation says", async () => {
        await driver.transcripts.append(ref, msg("user", "to be deleted"));
        const at = T0 + 12_345;
        const where = driver.transcripts.archivedLocation(ref, "deleted", at);
        expect(where).not.toBe(driver.transcripts.locate(ref));
        expect(await driver.transcripts.archive(ref, "deleted", { at })).toBe(where);
        expect(await driver.transcripts.readTail(ref, { limit: 10 })).toEqual([]);
      });

      it("keeps call order for concurrent appends", async () => {
        const msgs = Array.from({ length: 200 }, (_, i) =>
          msg(i % 2 ? "assistant" : "user", `n${i} ${"x".repeat(i)}`),
        );
        await Promise.all(msgs.map((m) => driver.transcripts.append(ref, m)));
        const got = await driver.transcripts.readTail(ref, { limit: 500 });
        expect(got.map((m) => m.id)).toEqual(msgs.map((m) => m.id));
        expect(got).toEqual(msgs);
      });

      it("filters tool messages unless includeTools, applying the limit after filtering", async () => {
        const all = [
          msg("user", "u1"),
          msg("assistant", "a1"),
          msg("toolCall", { name: "x" }, { toolCallId: "c1", toolName: "x" }),
          msg("toolResult", { ok: true }, { toolCallId: "c1", toolName: "x" }),
          msg("toolCall", { name: "y" }, { toolCallId: "c2", toolName: "y" }),
          msg("toolResult", { ok: true }, { toolCallId: "c2", toolName: "y" }),
          msg("assistant", "a2"),
        ];
        for (const m of all) await driver.transcripts.append(ref, m);
        expect((await driver.transcripts.readTail(ref, { limit: 2 })).map((m) => m.id)).toEqual([
          all[1]!.id,
          all[6]!.id,
        ]);
        expect(
          (await driver.transcripts.readTail(ref, { limit: 3, includeTools: true })).map((m) => m.id),
        ).toEqual([all[4]!.id, all[5]!.id, all[6]!.id]);
        expect(await driver.transcripts.readTail(ref, { limit: 10, includeTools: false })).toHaveLength(3);
        expect(await driver.transcripts.readTail(ref, { limit: 10, includeTools: true })).toHaveLength(7);
      });

      it("a compaction line (API.md §6) round-trips and is not a tool message", async () => {
        const content = { summary: "S", fromId: "a", toId: "b", tokensBefore: 10, tokensAfter: 3 };
        const all = [msg("user", "u1"), msg("compaction", content, { runId: "r1" }), msg("assistant", "a1")];
        for (const m of all) await driver.transcripts.append(ref, m);
        expect(await driver.transcripts.readTail(ref, { limit: 10 })).toEqual(all);
        expect(await driver.transcripts.readTail(ref, { limit: 10, includeTools: true })).toEqual(all);
      });

      it("counts messages, including ones appended after a count", async () => {
        for (let i = 0; i < 7; i++) await driver.transcripts.append(ref, msg("user", `m${i}`));
        expect(await driver.transcripts.count(ref)).toBe(7);
        await driver.transcripts.append(ref, msg("toolCall", {}));
        await driver.transcripts.append(ref, msg("assistant", "x"));
        expect(await driver.transcripts.count(ref)).toBe(9);
      });

      it("keeps transcripts apart per sessionId and per agent", async () => {
        const other: TranscriptRef = { agentId: "main", sessionId: randomUUID() };
        const otherAgent: TranscriptRef = { agentId: "research", sessionId: ref.sessionId };
        await driver.transcripts.append(ref, msg("user", "mine"));
        await driver.transcripts.append(other, msg("user", "theirs"));
        await driver.transcripts.append(otherAgent, msg("user", "agent2"));
        expect((await driver.transcripts.readTail(ref, { limit: 10 })).map((m) => m.content)).toEqual([
          "mine",
        ]);
        expect((await driver.transcripts.readTail(other, { limit: 10 })).map((m) => m.content)).toEqual([
          "theirs",
        ]);
        expect((await driver.transcripts.readTail(otherAgent, { limit: 10 })).map((m) => m.content)).toEqual([
          "agent2",
        ]);
        expect(driver.transcripts.locate(ref)).not.toBe(driver.transcripts.locate(other));
        expect(driver.transcripts.locate(ref)).not.toBe(driver.transcripts.locate(otherAgent));
        expect(driver.transcripts.locate(ref)).toBe(driver.transcripts.locate({ ...ref }));
        expect(driver.transcripts.locate(ref)).toContain(ref.sessionId);
      });

      it("archive moves the transcript out of the live set (kept), and a later append starts fresh", async () => {
        await driver.transcripts.append(ref, msg("user", "before"));
        await driver.transcripts.append(ref, msg("assistant", "reply"));
        expect(await driver.transcripts.count(ref)).toBe(2);
        const where = await driver.transcripts.archive(ref, "archived");
        expect(typeof where).toBe("string");
        expect(where).not.toBe(driver.transcripts.locate(ref));
        expect(await driver.transcripts.readTail(ref, { limit: 10 })).toEqual([]);
        expect(await driver.transcripts.count(ref)).toBe(0);
        await driver.transcripts.append(ref, msg("user", "after"));
        expect((await driver.transcripts.readTail(ref, { limit: 10 })).map((m) => m.content)).toEqual([
          "after",
        ]);
        expect(
          await driver.transcripts.archive({ agentId: "main", sessionId: randomUUID() }, "deleted"),
        ).toBeNull();
      });

      it("appending a message whose id is already in the transcript is a no-op (API.md §6)", async () => {
        const user = msg("user", "hello", { id: "run1:in", runId: "run1" });
        const reply = msg("assistant", "hi", { id: "run1:s0:a", runId: "run1" });
        expect(await driver.transcripts.append(ref, user)).toBe(true);
        expect(await driver.transcripts.append(ref, reply)).toBe(true);
        // a re-run of the turn after a crash appends the same ids again (even with other content)
        expect(await driver.transcripts.append(ref, { ...user })).toBe(false);
        expect(await driver.transcripts.append(ref, { ...reply, content: "hi again" })).toBe(false);
        const again = await Promise.all([
          driver.transcripts.append(ref, { ...reply }),
          driver.transcripts.append(ref, { ...reply }),
        ]);
        expect(again).toEqual([false, false]);
        const fresh = msg("assistant", "next", { id: "run1:s1:a", runId: "run1" });
        const both = await Promise.all([
          driver.transcripts.append(ref, fresh),
          driver.transcripts.append(ref, { ...fresh }),
        ]);
        expect(both.filter(Boolean)).toHaveLength(1);
        const got = await driver.transcripts.readTail(ref, { limit: 10, includeTools: true });
        expect(got.map((m) => m.id)).toEqual(["run1:in", "run1:s0:a", "run1:s1:a"]);
        expect(got[1]!.content).toBe("hi");
        expect(await driver.transcripts.count(ref)).toBe(3);
      });

      it("the id check survives archive: an archived transcript's ids do not block a fresh one", async () => {
        const m = msg("user", "before", { id: "r9:in" });
        await driver.transcripts.append(ref, m);
        await driver.transcripts.archive(ref, "archived");
        expect(await driver.transcripts.append(ref, { ...m, content: "after" })).toBe(true);
        expect((await driver.transcripts.readTail(ref, { limit: 10 })).map((x) => x.content)).toEqual([
          "after",
        ]);
      });

      it("reports warnings as a list", async () => {
        expect(Array.isArray(driver.transcripts.warnings())).toBe(true);
      });
    });

    describe("records: every driver refuses the same malformed records (src/store/records.ts)", () => {
      const refusal = async (p: Promise<unknown>) => {
        const err = (await p.then(
          () => null,
          (e: unknown) => e,
        )) as { code?: string; message?: string; details?: { field?: string } } | null;
        return err && { code: err.code, message: err.message, field: err.details?.field };
      };

      it.each<[string, Partial<SessionEntry> | Record<string, unknown>, string, string]>([
        ["an empty sessionId", { sessionId: "" }, "sessionId", "entry.sessionId: must be a non-empty string"],
        ["a missing agentId", { agentId: undefined }, "agentId", "entry.agentId: must be a non-empty string"],
        [
          "a non-finite updatedAt",
          { updatedAt: Number.NaN },
          "updatedAt",
          "entry.updatedAt: must be a finite number (ms)",
        ],
        ["a label that is not a string", { label: 5 }, "label", "entry.label: must be a string"],
        [
          "a spawnedBy that is not a string",
          { spawnedBy: ["x"] },
          "spawnedBy",
          "entry.spawnedBy: must be a string",
        ],
      ])("sessions.put refuses %s", async (_row, over, field, message) => {
        const bad = { ...entry("k1"), ...over } as SessionEntry;
        expect(await refusal(driver.sessions.put(bad))).toEqual({ code: "INVALID_PARAMS", message, field });
        expect(await driver.sessions.get("k1")).toBeNull();
      });

      it("sessions.patch refuses a patch that makes the entry malformed, and keeps the entry", async () => {
        await driver.sessions.put(entry("k1", { label: "ok" }));
        const patch = { label: 7 } as unknown as Parameters<StoreDriver["sessions"]["patch"]>[1];
        expect(await refusal(driver.sessions.patch("k1", patch))).toEqual({
          code: "INVALID_PARAMS",
          message: "patch.label: must be a string",
          field: "label",
        });
        expect((await driver.sessions.get("k1"))?.label).toBe("ok");
      });

      it("runs.put and runs.patch refuse an unknown status, naming the allowed ones", async () => {
        const message = "must be one of queued, running, waiting, ok, error, timeout, aborted";
        const r: RunRecord = {
          runId: "r1",
          sessionKey: "k",
          agentId: "main",
          status: "queued",
          createdAt: T0,
        };
        const bogus = { ...r, status: "bogus" } as unknown as RunRecord;
        expect(await refusal(driver.runs.put(bogus))).toEqual({
          code: "INVALID_PARAMS",
          message: `run.status: ${message}`,
          field: "status",
        });
        await driver.runs.put(r);
        expect(
          await refusal(driver.runs.patch("r1", { status: "bogus" } as unknown as Partial<RunRecord>)),
        ).toEqual({
          code: "INVALID_PARAMS",
          message: `patch.status: ${message}`,
          field: "status",
        });
        expect((await driver.runs.get("r1"))?.status).toBe("queued");
      });
    });

    describe("runs", () => {
      function run(runId: string, over: Partial<RunRecord> = {}): RunRecord {
        return {
          runId,
          sessionKey: "agent:main:main",
          agentId: "main",
          status: "queued",
          createdAt: T0,
          ...over,
        };
      }

      it("put/get round-trips; absent is null", async () => {
        const r = run("r1", { origin: "inbound", deliver: true, usage: { input: 1, output: 2 } });
        await driver.runs.put(r);
        expect(await driver.runs.get("r1")).toEqual(r);
        expect(await driver.runs.get("nope")).toBeNull();
      });

      it("patch merges and returns the result; absent is null", async () => {
        await driver.runs.put(run("r1"));
        const p = await driver.runs.patch("r1", { status: "ok", reply: "done", endedAt: T0 + 5 });
        expect(p).toEqual({ ...run("r1"), status: "ok", reply: "done", endedAt: T0 + 5 });
        expect(await driver.runs.get("r1")).toEqual(p);
        expect(await driver.runs.patch("nope", { status: "ok" })).toBeNull();
        expect(await driver.runs.get("nope")).toBeNull();
      });

      it("concurrent patches all apply", async () => {
        await driver.runs.put(run("r1"));
        await Promise.all([
          driver.runs.patch("r1", { status: "running", startedAt: T0 + 1 }),
          driver.runs.patch("r1", { model: "openai/x" }),
          driver.runs.patch("r1", { origin: "spawn" }),
        ]);
        expect(await driver.runs.get("r1")).toMatchObject({
          status: "running",
          startedAt: T0 + 1,
          model: "openai/x",
          origin: "spawn",
        });
      });

      it("listBySession returns that session's runs newest first, up to limit", async () => {
        for (let i = 0; i < 5; i++) await driver.runs.put(run(`r${i}`, { createdAt: T0 + i }));
        await driver.runs.put(run("x", { sessionKey: "agent:main:other", createdAt: T0 + 10 }));
        expect((await driver.runs.listBySession("agent:main:main", 3)).map((r) => r.runId)).toEqual([
          "r4",
          "r3",
          "r2",
        ]);
        expect((await driver.runs.listBySession("agent:main:other", 10)).map((r) => r.runId)).toEqual(["x"]);
        expect(await driver.runs.listBySession("agent:main:none", 10)).toEqual([]);
      });

      it("listBySession shows each run as last written, in creation order, after patches and puts", async () => {
        for (let i = 0; i < 5; i++) await driver.runs.put(run(`r${i}`, { createdAt: T0 + i }));
        await driver.runs.patch("r2", { status: "running", startedAt: T0 + 20 });
        await driver.runs.patch("r4", { status: "ok", reply: "four" });
        await driver.runs.put(run("r1", { createdAt: T0 + 10, status: "error" }));
        await driver.runs.patch("r2", { status: "ok", reply: "two" });
        const listed = await driver.runs.listBySession("agent:main:main", 10);
        expect(listed.map((r) => r.runId)).toEqual(["r1", "r4", "r3", "r2", "r0"]);
        for (const r of listed) expect(r).toEqual(await driver.runs.get(r.runId));
        expect(listed.map((r) => r.status)).toEqual(["error", "ok", "queued", "ok", "queued"]);
      });

      it("returns copies", async () => {
        await driver.runs.put(run("r1", { usage: { input: 1, output: 1 } }));
        const got = (await driver.runs.get("r1"))!;
        got.status = "error";
        got.usage!.input = 99;
        expect(await driver.runs.get("r1")).toMatchObject({ status: "queued", usage: { input: 1 } });
      });
    });

    describe("outbox", () => {
      it("claims once; get reports the state", async () => {
        expect(await driver.outbox.get("o1")).toBeNull();
        expect(await driver.outbox.claim("o1", 60_000)).toBe(true);
        expect(await driver.outbox.claim("o1", 60_000)).toBe(false);
        expect(await driver.outbox.get("o1")).toEqual({ state: "claimed" });
      });

      it("exactly one of many concurrent claims wins", async () => {
        const results = await Promise.all(
          Array.from({ length: 20 }, () => driver.outbox.claim("o1", 60_000)),
        );
        expect(results.filter(Boolean)).toHaveLength(1);
      });

      it("complete records the message ids; a completed id cannot be claimed or released", async () => {
        await driver.outbox.claim("o1", 60_000);
        await driver.outbox.complete("o1", { messageIds: ["10", "11"] });
        expect(await driver.outbox.get("o1")).toEqual({ state: "done", messageIds: ["10", "11"] });
        expect(await driver.outbox.claim("o1", 60_000)).toBe(false);
        await driver.outbox.release("o1");
        expect(await driver.outbox.get("o1")).toEqual({ state: "done", messageIds: ["10", "11"] });
      });

      it("lease: a short lease while sending, a long mark once sent; an expired lease is taken again", async () => {
        expect(await driver.outbox.lease("d1", 60_000, 3_600_000)).toEqual({
          acquired: true,
          expired: false,
        });
        const busy = await driver.outbox.lease("d1", 60_000, 3_600_000);
        expect(busy).toMatchObject({ acquired: false, state: "leased" });
        expect(busy.acquired === false && busy.state === "leased" && busy.retryInMs > 0).toBe(true);
        expect(await driver.outbox.get("d1")).toEqual({ state: "claimed" });
        await driver.outbox.complete("d1", { messageIds: ["p1"] }, 3_600_000);
        expect(await driver.outbox.lease("d1", 60_000, 3_600_000)).toEqual({
          acquired: false,
          state: "done",
          messageIds: ["p1"],
        });
        // a lease whose holder died (no mark, no release) can be taken again once it ran out
        expect(await driver.outbox.lease("d2", 30, 3_600_000)).toEqual({ acquired: true, expired: false });
        for (let i = 0; i < 100; i++) {
          const r = await driver.outbox.lease("d2", 30, 3_600_000);
          if (r.acquired) {
            expect(r).toEqual({ acquired: true, expired: true });
            break;
          }
          expect(i).toBeLessThan(99);
          await new Promise((res) => setTimeout(res, 10));
        }
        // release after a failed send: taken again at once, not as an expired lease
        await driver.outbox.release("d2");
        expect(await driver.outbox.lease("d2", 60_000, 3_600_000)).toEqual({
          acquired: true,
          expired: false,
        });
        // a plain claim (inbound dedupe) counts as held until it expires
        await driver.outbox.claim("c1", 60_000);
        expect(await driver.outbox.lease("c1", 60_000, 3_600_000)).toMatchObject({
          acquired: false,
          state: "leased",
        });
      });

      it("exactly one of many concurrent leases wins", async () => {
        const results = await Promise.all(
          Array.from({ length: 20 }, () => driver.outbox.lease("d1", 60_000, 3_600_000)),
        );
        expect(results.filter((r) => r.acquired)).toHaveLength(1);
      });

      it("release lets a retry claim again", async () => {
        await driver.outbox.claim("o1", 60_000);
        await driver.outbox.release("o1");
        expect(await driver.outbox.get("o1")).toBeNull();
        expect(await driver.outbox.claim("o1", 60_000)).toBe(true);
        await driver.outbox.release("never-claimed");
        expect(await driver.outbox.get("never-claimed")).toBeNull();
      });
    });

    describe("kv", () => {
      it("set/get/delete/list within a namespace", async () => {
        expect(await driver.kv.get("ns", "a")).toBeNull();
        await driver.kv.set("ns", "a", { x: 1, nested: { y: [1, 2] } });
        await driver.kv.set("ns", "b", "text");
        await driver.kv.set("other", "a", 42);
        expect(await driver.kv.get("ns", "a")).toEqual({ x: 1, nested: { y: [1, 2] } });
        expect(await driver.kv.get("other", "a")).toBe(42);
        await driver.kv.set("ns", "a", { x: 2 });
        expect(await driver.kv.get("ns", "a")).toEqual({ x: 2 });
        const listed = (await driver.kv.list<unknown>("ns")).sort((p, q) => p.key.localeCompare(q.key));
        expect(listed).toEqual([
          { key: "a", value: { x: 2 } },
          { key: "b", value: "text" },
        ]);
        await driver.kv.delete("ns", "a");
        expect(await driver.kv.get("ns", "a")).toBeNull();
        expect(await driver.kv.list("ns")).toEqual([{ key: "b", value: "text" }]);
        await driver.kv.delete("ns", "missing");
        expect(await driver.kv.list("empty")).toEqual([]);
      });

      it("stores a copy of the value", async () => {
        const v = { list: [1] };
        await driver.kv.set("ns", "k", v);
        v.list.push(2);
        const got = (await driver.kv.get<{ list: number[] }>("ns", "k"))!;
        expect(got.list).toEqual([1]);
        got.list.push(3);
        expect(await driver.kv.get("ns", "k")).toEqual({ list: [1] });
      });

      it("a delete issued right after a set wins", async () => {
        const a = driver.kv.set("ns", "k", 1);
        const b = driver.kv.delete("ns", "k");
        await Promise.all([a, b]);
        expect(await driver.kv.get("ns", "k")).toBeNull();
      });
    });
  });
}
