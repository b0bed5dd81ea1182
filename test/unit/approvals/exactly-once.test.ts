import { afterEach, describe, expect, it } from "vitest";
import { approvalIdFor, guardToolCall } from "../../../src/approvals/gate.js";
import { approvalVerdict, argGlobMatches } from "../../../src/approvals/policy.js";
import { resolveApproval } from "../../../src/approvals/resolve.js";
import { parseConfig } from "../../../src/config/index.js";
import { EventBus } from "../../../src/events.js";
import { silentLogger } from "../../../src/log.js";
import type { DeliveryRequest, Services } from "../../../src/services/index.js";
import { createFsStore } from "../../../src/store/fs/index.js";
import { createRedisStore } from "../../../src/store/redis/index.js";
import type { SessionEntry, StoreDriver } from "../../../src/store/types.js";
import { randomPrefix, tempDir } from "../../helpers.js";
import { describeRedis, newRedisClient, unlinkMatching } from "../../redis.js";

/**
 * Exactly once, on both store drivers: the approved call runs once per approval id, whatever
 * else happens — a double press, two clients resolving at the same moment, a press after the
 * timeout, a turn re-run after a crash, two workers running the same turn, two gateways (two
 * store clients on one Redis prefix) taking the same press.
 */

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const entry: SessionEntry = {
  key: "agent:main:chat",
  sessionId: "s1",
  agentId: "main",
  createdAt: 1,
  updatedAt: 1,
  deliveryContext: { channel: "memory", to: "chat-1" },
};

function servicesOn(store: StoreDriver, timeoutSeconds = 600): Services {
  const config = parseConfig({
    tools: { approvals: { rules: [{ tool: "act", action: "ask" }], timeoutSeconds } },
  });
  const delivered: string[] = [];
  return {
    config,
    store,
    bus: new EventBus(),
    logger: silentLogger(),
    now: Date.now,
    delivery: {
      async deliver(req: DeliveryRequest) {
        delivered.push(req.idempotencyKey);
        return { status: "sent", channel: "memory", messageIds: ["m1"] };
      },
    },
  } as unknown as Services;
}

async function waitPending(services: Services, id: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await services.store.kv.get("approvals", id)) !== null) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("approval never appeared");
}

function gate(
  services: Services,
  effectId: string,
  count: { n: number },
  signal = new AbortController().signal,
) {
  return guardToolCall(
    services,
    {
      caller: { sessionKey: entry.key, agentId: "main", entry, runId: "run-1", depth: 0, sandboxed: false },
      tool: "act",
      args: { x: 1 },
      effectId,
      signal,
      traits: { mcp: false },
    },
    async () => {
      count.n++;
      return { status: "ok", n: count.n };
    },
  );
}

function suite(name: string, open: () => Promise<{ a: StoreDriver; b: StoreDriver }>) {
  describe(name, () => {
    it("a double press and two clients at once: one decision, one run", async () => {
      const { a, b } = await open();
      const sa = servicesOn(a);
      const sb = servicesOn(b);
      const count = { n: 0 };
      const effectId = `run-1:s0:c0:${Math.random()}`;
      const id = approvalIdFor(effectId);
      const waiting = gate(sa, effectId, count);
      await waitPending(sa, id);
      const by = { by: "telegram:1", approver: true };
      const results = await Promise.all([
        resolveApproval(sa, id, "allow-once", by),
        resolveApproval(sb, id, "allow-once", by),
        resolveApproval(sa, id, "deny", by),
        resolveApproval(sb, id, "allow-always", by),
      ]);
      expect(results.filter((r) => r.ok)).toHaveLength(1);
      expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.code === "CONFLICT")).toBe(true);
      const out = await waiting;
      const winner = results.find((r) => r.ok);
      if (winner?.ok && winner.record.decision === "deny")
        expect(out).toMatchObject({ status: "denied", reason: "denied" });
      else expect(out).toEqual({ status: "ok", n: 1 });
      // a re-run of the turn (same effect id) and a second worker get the kept result: no second run
      const again = await Promise.all([gate(sa, effectId, count), gate(sb, effectId, count)]);
      expect(again).toEqual([out, out]);
      expect(count.n).toBe(winner?.ok && winner.record.decision === "deny" ? 0 : 1);
    });

    it("two workers waiting on the same approval (a stalled turn taken over) run the call once", async () => {
      const { a, b } = await open();
      const sa = servicesOn(a);
      const sb = servicesOn(b);
      const count = { n: 0 };
      const effectId = `run-1:s0:c1:${Math.random()}`;
      const id = approvalIdFor(effectId);
      const w1 = gate(sa, effectId, count);
      const w2 = gate(sb, effectId, count);
      await waitPending(sa, id);
      expect((await resolveApproval(sb, id, "allow-once", { by: "op", approver: true })).ok).toBe(true);
      const [r1, r2] = await Promise.all([w1, w2]);
      expect(count.n).toBe(1);
      expect([r1, r2]).toContainEqual({ status: "ok", n: 1 });
    });

    it("a press after the timeout changes nothing; the model gets reason timeout", async () => {
      const { a } = await open();
      const sa = servicesOn(a, 1);
      const count = { n: 0 };
      const effectId = `run-1:s0:c2:${Math.random()}`;
      const out = await gate(sa, effectId, count);
      expect(out).toMatchObject({ status: "denied", reason: "timeout" });
      const late = await resolveApproval(sa, approvalIdFor(effectId), "allow-once", {
        by: "op",
        approver: true,
      });
      expect(late.ok).toBe(false);
      expect(await gate(sa, effectId, count)).toMatchObject({ status: "denied", reason: "timeout" });
      expect(count.n).toBe(0);
    });

    it("a stranger's decision changes nothing", async () => {
      const { a } = await open();
      const sa = servicesOn(a);
      const count = { n: 0 };
      const effectId = `run-1:s0:c3:${Math.random()}`;
      const id = approvalIdFor(effectId);
      const ac = new AbortController();
      const waiting = gate(sa, effectId, count, ac.signal).catch(() => "aborted");
      await waitPending(sa, id);
      const r = await resolveApproval(sa, id, "allow-once", { by: "eve", approver: false });
      expect(r).toMatchObject({ ok: false, code: "FORBIDDEN" });
      expect((await sa.store.kv.get<{ status: string }>("approvals", id))?.status).toBe("pending");
      ac.abort(new Error("stop"));
      expect(await waiting).toBe("aborted");
      expect(count.n).toBe(0);
    });
  });
}

suite("exactly once: fs store", async () => {
  const t = tempDir();
  const a = await createFsStore({ stateDir: t.dir, logger: silentLogger() });
  cleanups.push(async () => {
    await a.close();
    t.cleanup();
  });
  // one fs store per state dir (locked): the second "client" is the same store
  return { a, b: a };
});

describeRedis("exactly once on redis", () => {
  suite("two gateways on one redis prefix", async () => {
    const prefix = randomPrefix("approvals");
    const ca = newRedisClient();
    const cb = newRedisClient();
    const a = await createRedisStore({ client: ca, prefix, logger: silentLogger() });
    const b = await createRedisStore({ client: cb, prefix, logger: silentLogger() });
    cleanups.push(async () => {
      await a.close();
      await b.close();
      await unlinkMatching(ca, a.keys.pattern());
      await ca.quit();
      await cb.quit();
    });
    return { a, b };
  });
});

describe("policy", () => {
  const cfg = (c: Record<string, unknown>) => parseConfig({ tools: { approvals: c } }).tools.approvals;
  it("auto: read-only MCP tools run, other MCP tools ask, session tools run", () => {
    const c = cfg({});
    expect(approvalVerdict(c, "files__read_file", {}, { mcp: true, readOnly: true }, false).action).toBe(
      "allow",
    );
    expect(approvalVerdict(c, "files__write_file", {}, { mcp: true }, false).action).toBe("ask");
    expect(approvalVerdict(c, "files__write_file", {}, { mcp: true, readOnly: false }, false).action).toBe(
      "ask",
    );
    expect(approvalVerdict(c, "sessions_send", {}, { mcp: false }, false).action).toBe("allow");
  });
  it("rules: first match wins, argument globs, deny beats allow-always, allow-always beats ask", () => {
    const c = cfg({
      rules: [
        { tool: "files__write_file", action: "deny", args: { path: "/etc/**" } },
        { tool: "files__*", action: "ask", args: { path: "/srv/notes/**" } },
        { tool: "files__*", action: "allow" },
      ],
    });
    const mcp = { mcp: true };
    expect(approvalVerdict(c, "files__write_file", { path: "/etc/passwd" }, mcp, true)).toEqual({
      action: "deny",
      by: "rule:0",
    });
    expect(approvalVerdict(c, "files__write_file", { path: "/srv/notes/a/b.md" }, mcp, false)).toEqual({
      action: "ask",
      by: "rule:1",
    });
    expect(approvalVerdict(c, "files__write_file", { path: "/srv/notes/a/b.md" }, mcp, true)).toEqual({
      action: "allow",
      by: "always",
    });
    expect(approvalVerdict(c, "files__write_file", { path: "/tmp/x" }, mcp, false)).toEqual({
      action: "allow",
      by: "rule:2",
    });
    expect(approvalVerdict(cfg({ default: "deny" }), "x", {}, { mcp: false }, false).action).toBe("deny");
  });
  it("argument globs: * stays in a segment, ** crosses them", () => {
    expect(argGlobMatches("/srv/*.md", "/srv/a.md")).toBe(true);
    expect(argGlobMatches("/srv/*.md", "/srv/a/b.md")).toBe(false);
    expect(argGlobMatches("/srv/**", "/srv/a/b.md")).toBe(true);
    expect(argGlobMatches("a?c", "abc")).toBe(true);
    expect(argGlobMatches("a.c", "abc")).toBe(false);
  });
  it("config: bad approvals name the field", () => {
    expect(() => parseConfig({ tools: { approvals: { rules: [{ tool: "x", action: "maybe" }] } } })).toThrow(
      /tools\.approvals\.rules\.0\.action/,
    );
    expect(() => parseConfig({ tools: { approvals: { timeoutSeconds: 0 } } })).toThrow(/timeoutSeconds/);
  });
});
