import { z } from "zod";
import { ALWAYS_NS, APPROVALS_NS, BY_CHAT_NS, RESULTS_NS } from "../store/kv-namespaces.js";
import type { StoreDriver } from "../store/types.js";

/**
 * Pending approvals and their decisions, on whichever store driver runs (fs: the journaled
 * key/value file under the state dir; redis: hashes under the store prefix). A decision is taken
 * once: the first `decide` claims `approval:decided:<id>` in the outbox (atomic on both drivers:
 * one serialised journal write, one SET NX), and only the claimant writes it; every later press,
 * a press after the timeout, or the same press on a second gateway finds the claim taken and
 * changes nothing. The approved call runs once the same way (`approval:ran:<id>`).
 */

/** Claims outlive any approval: a request lives at most a week (timeoutSeconds). */
const CLAIM_TTL_MS = 8 * 24 * 3600 * 1000;
/** Decided approvals are kept this long (a late press is told who decided), then dropped. */
export const DECIDED_KEEP_MS = 24 * 3600 * 1000;

export const DECISIONS = ["allow-once", "allow-always", "deny"] as const;
export type Decision = (typeof DECISIONS)[number];
export const decisionSchema = z.enum(DECISIONS);

export const approvalRouteSchema = z.object({
  channel: z.string().min(1),
  to: z.string().min(1),
  accountId: z.string().optional(),
  threadId: z.string().optional(),
});

export const approvalRecordSchema = z.object({
  id: z.string().min(1),
  sessionKey: z.string().min(1),
  runId: z.string().min(1),
  agentId: z.string().min(1),
  tool: z.string().min(1),
  args: z.unknown(),
  requestedAt: z.number(),
  expiresAt: z.number(),
  /** The session whose chat got the request (the caller's own, or a requester's), and its route. */
  chatSessionKey: z.string().optional(),
  route: approvalRouteSchema.optional(),
  /**
   * Why the chat did not get the request (its send policy denies the agent's posts): then there is
   * no `route`, and the approvers were told in direct messages.
   */
  withheld: z.string().optional(),
  /** `<channel>:<senderId>` of the person whose message started the run (approvers: "requester"). */
  requester: z.string().optional(),
  status: z.enum(["pending", "decided"]),
  decision: z.enum([...DECISIONS, "timeout"]).optional(),
  decidedBy: z.string().optional(),
  decidedAt: z.number().optional(),
});

export type ApprovalRecord = z.infer<typeof approvalRecordSchema>;
export type ApprovalRoute = z.infer<typeof approvalRouteSchema>;

export interface AlwaysRule {
  agentId: string;
  tool: string;
  decidedBy: string;
  at: number;
}

export function alwaysKey(agentId: string, tool: string): string {
  return `${agentId}:${tool}`;
}

export function chatKey(route: ApprovalRoute): string {
  return `${route.channel}:${route.to}:${route.threadId ?? ""}`;
}

/** Bumped whenever this process creates or decides an approval (the pending-count cache's key). */
let generation = 0;

export class ApprovalStore {
  constructor(private readonly store: Pick<StoreDriver, "kv" | "outbox">) {}

  async get(id: string): Promise<ApprovalRecord | null> {
    const raw = await this.store.kv.get<unknown>(APPROVALS_NS, id);
    if (raw === null) return null;
    const parsed = approvalRecordSchema.safeParse(raw);
    return parsed.success ? parsed.data : null;
  }

  /** Creates the record unless one with this id exists; returns the stored one either way. */
  async create(rec: ApprovalRecord): Promise<ApprovalRecord> {
    const existing = await this.get(rec.id);
    if (existing) return existing;
    await this.store.kv.set(APPROVALS_NS, rec.id, rec);
    generation++;
    if (rec.route) await this.store.kv.set(BY_CHAT_NS, chatKey(rec.route), { id: rec.id });
    return rec;
  }

  /** Pending approvals not yet expired, oldest first; prunes decided records past their keep time. */
  async listPending(now: number, sessionKey?: string): Promise<ApprovalRecord[]> {
    const out: ApprovalRecord[] = [];
    for (const { key, value } of await this.store.kv.list<unknown>(APPROVALS_NS)) {
      const parsed = approvalRecordSchema.safeParse(value);
      if (!parsed.success) continue;
      const r = parsed.data;
      if (r.status === "decided") {
        if ((r.decidedAt ?? r.requestedAt) + DECIDED_KEEP_MS < now) {
          await this.store.kv.delete(APPROVALS_NS, key);
          await this.store.kv.delete(RESULTS_NS, key);
        }
        continue;
      }
      if (r.expiresAt <= now) continue;
      if (sessionKey !== undefined && r.sessionKey !== sessionKey) continue;
      out.push(r);
    }
    return out.sort((a, b) => a.requestedAt - b.requestedAt || a.id.localeCompare(b.id));
  }

  /** How many approvals wait for a decision now (not expired); reads, never prunes. */
  async countPending(now: number): Promise<number> {
    let n = 0;
    for (const { value } of await this.store.kv.list<unknown>(APPROVALS_NS)) {
      const parsed = approvalRecordSchema.safeParse(value);
      if (parsed.success && parsed.data.status === "pending" && parsed.data.expiresAt > now) n++;
    }
    return n;
  }

  /**
   * The one decision of an approval: true when this call took it (and wrote it), false when
   * another decision (or the timeout) came first.
   */
  async decide(id: string, decision: Decision | "timeout", by: string, now: number): Promise<boolean> {
    const cur = await this.get(id);
    if (!cur || cur.status === "decided") return false;
    if (!(await this.store.outbox.claim(`approval:decided:${id}`, CLAIM_TTL_MS))) return false;
    await this.store.kv.set(APPROVALS_NS, id, {
      ...cur,
      status: "decided",
      decision,
      decidedBy: by,
      decidedAt: now,
    } satisfies ApprovalRecord);
    generation++;
    if (cur.route) {
      const k = chatKey(cur.route);
      const latest = await this.store.kv.get<{ id?: string }>(BY_CHAT_NS, k);
      if (latest?.id === id) await this.store.kv.delete(BY_CHAT_NS, k);
    }
    return true;
  }

  /** The pending approval a numbered reply in this chat decides, if any. */
  async pendingInChat(route: ApprovalRoute, now: number): Promise<ApprovalRecord | null> {
    const latest = await this.store.kv.get<{ id?: string }>(BY_CHAT_NS, chatKey(route));
    if (!latest?.id) return null;
    const rec = await this.get(latest.id);
    return rec && rec.status === "pending" && rec.expiresAt > now ? rec : null;
  }

  /** true once: the approved call may run now (a second caller — a re-run, a second worker — may not). */
  claimRun(id: string): Promise<boolean> {
    return this.store.outbox.claim(`approval:ran:${id}`, CLAIM_TTL_MS);
  }

  async saveResult(id: string, result: Record<string, unknown>): Promise<void> {
    await this.store.kv.set(RESULTS_NS, id, result);
  }

  result(id: string): Promise<Record<string, unknown> | null> {
    return this.store.kv.get<Record<string, unknown>>(RESULTS_NS, id);
  }

  async allowAlways(rule: AlwaysRule): Promise<void> {
    await this.store.kv.set(ALWAYS_NS, alwaysKey(rule.agentId, rule.tool), rule);
  }

  async isAlways(agentId: string, tool: string): Promise<boolean> {
    return (await this.store.kv.get(ALWAYS_NS, alwaysKey(agentId, tool))) !== null;
  }

  async listAlways(): Promise<AlwaysRule[]> {
    const rows = await this.store.kv.list<AlwaysRule>(ALWAYS_NS);
    return rows.map((r) => r.value).sort((a, b) => a.at - b.at);
  }
}

/**
 * The number of pending approvals for the `switchboard_approvals_pending` gauge, read at scrape
 * time: counted again only when this process created or decided an approval since the last count,
 * or when the last count is older than `maxAgeMs` (a decision taken by another process on the
 * same Redis, an expiry). So a scrape every few seconds reads the approvals hash (one HSCAN of
 * that hash alone, never the keyspace; decided records leave it after a day) at most every
 * `maxAgeMs`.
 */
export function pendingApprovalsCount(
  store: Pick<StoreDriver, "kv" | "outbox">,
  maxAgeMs = 15_000,
): () => Promise<number> {
  const approvals = new ApprovalStore(store);
  let cached: { n: number; gen: number; at: number } | null = null;
  return async () => {
    const now = Date.now();
    if (cached && cached.gen === generation && now - cached.at < maxAgeMs) return cached.n;
    const gen = generation;
    const n = await approvals.countPending(now);
    cached = { n, gen, at: now };
    return n;
  };
}
