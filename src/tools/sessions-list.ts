import { z } from "zod";
import { derivedTitle, lastMessage } from "../history/preview.js";
import { buildHistoryView } from "../history/view.js";
import { checkVisible } from "../policy/access.js";
import { effectiveVisibility, type Visibility } from "../policy/visibility.js";
import type { Services } from "../services/index.js";
import { classifyKind, displayKey, isReservedKey, normalizeKey } from "../sessions/keys.js";
import { type SessionRow, toRow } from "../sessions/rows.js";
import type { ListSessionsQuery, SessionEntry, SessionKind } from "../store/types.js";
import { defineTool, type ToolCaller } from "./types.js";

/**
 * `sessions_list` (SEMANTICS.md §3): the sessions the caller may see, newest-updated first.
 * Visibility is applied row by row and invisible rows are simply absent — the result carries no
 * counter or hint that would reveal them (`count === sessions.length`). Reserved keys are never
 * listed. The caller agent's main bucket is shown as `main`, which every session tool accepts back.
 *
 * Cost is bounded by what the caller may see, not by the store size: the caller's own tree comes
 * from the store's spawnedBy index; wider visibilities page through the store's filtered listing.
 */

export const SESSION_KINDS: readonly SessionKind[] = ["main", "group", "cron", "hook", "node", "other"];
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 200;
const MAX_MESSAGE_LIMIT = 20;
/** Tree walk bounds: spawn depth is at most 5; 16 matches the lineage bound of the visibility check. */
const MAX_TREE_DEPTH = 16;
const MAX_TREE_NODES = 2000;
const CHILDREN_PER_PARENT = 1000;
/** Rows of the store listing examined at most for one call (only `all` with an agent allow list pages far). */
const MAX_SCAN = 10_000;
/** Total size of the `messages` of all rows in one sessions_list result. */
const MAX_TOTAL_MESSAGE_BYTES = 256 * 1024;

/** Transcript tails read in parallel for messageLimit. */
const READ_CONCURRENCY = 4;

export const sessionsListSchema = z.strictObject({
  kinds: z
    .array(z.string().max(32))
    .max(16)
    .optional()
    .describe(
      'Only these kinds: "main", "group", "cron", "hook", "node", "other". Unknown kinds are ignored; if none remain, no kind filter applies.',
    ),
  limit: z
    .number()
    .min(0)
    .optional()
    .describe(`Maximum rows (default ${DEFAULT_LIMIT}; clamped to 1..${MAX_LIMIT}).`),
  activeMinutes: z.number().positive().optional().describe("Only sessions updated within this many minutes."),
  messageLimit: z
    .number()
    .min(0)
    .optional()
    .describe(
      `Include the last N messages of each session (0..${MAX_MESSAGE_LIMIT}, default 0; tool calls/results removed, secrets redacted).`,
    ),
  label: z.string().max(512).optional().describe("Only sessions with exactly this label."),
  agentId: z.string().max(64).optional().describe("Only sessions of this agent."),
  search: z
    .string()
    .max(512)
    .optional()
    .describe("Case-insensitive substring of the session key, label or display name."),
  includeDerivedTitles: z
    .boolean()
    .optional()
    .describe("Add `derivedTitle`: the first user message of each row (sanitised, at most 60 characters)."),
  includeLastMessage: z
    .boolean()
    .optional()
    .describe(
      "Add `lastMessage` { role, text, at }: the newest user/assistant message (sanitised, at most 200 characters).",
    ),
});

type ListArgs = z.infer<typeof sessionsListSchema>;

export interface SessionListFilters {
  kinds?: SessionKind[];
  label?: string;
  activeMinutes?: number;
  agentId?: string;
  search?: string;
}

function clampInt(v: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, Math.floor(v)));
}

/**
 * The arguments as sessions_list applies them (SEMANTICS §3): filters, `limit` clamped to 1..200 and
 * `messageLimit` to 0..20 (decimals floored). The `sessions.list` RPC applies them the same way.
 */
export function listBounds(args: ListArgs): {
  filters: SessionListFilters;
  limit: number;
  messageLimit: number;
} {
  return {
    filters: toFilters(args),
    limit: clampInt(args.limit ?? DEFAULT_LIMIT, 1, MAX_LIMIT),
    messageLimit: clampInt(args.messageLimit ?? 0, 0, MAX_MESSAGE_LIMIT),
  };
}

function toFilters(args: ListArgs): SessionListFilters {
  const kinds = [...new Set((args.kinds ?? []).map((k) => k.trim().toLowerCase()))].filter(
    (k): k is SessionKind => (SESSION_KINDS as readonly string[]).includes(k),
  );
  const f: SessionListFilters = {};
  if (kinds.length > 0) f.kinds = kinds;
  if (args.label !== undefined) f.label = args.label;
  if (args.activeMinutes !== undefined) f.activeMinutes = args.activeMinutes;
  if (args.agentId !== undefined && args.agentId.trim() !== "") f.agentId = normalizeKey(args.agentId);
  if (args.search !== undefined && args.search !== "") f.search = args.search;
  return f;
}

/** The store's own filter semantics, for candidate sets the store did not filter (the caller's tree). */
function matches(e: SessionEntry, f: SessionListFilters, now: number): boolean {
  if (e.archivedAt !== undefined) return false;
  if (f.agentId !== undefined && e.agentId !== f.agentId) return false;
  if (f.label !== undefined && e.label !== f.label) return false;
  if (f.activeMinutes !== undefined && e.updatedAt < now - f.activeMinutes * 60_000) return false;
  if (f.kinds !== undefined && !f.kinds.includes(classifyKind(e.key))) return false;
  if (f.search !== undefined) {
    const s = f.search.toLowerCase();
    const hit =
      e.key.toLowerCase().includes(s) ||
      (e.label?.toLowerCase().includes(s) ?? false) ||
      (e.displayName?.toLowerCase().includes(s) ?? false);
    if (!hit) return false;
  }
  return true;
}

export function storeQuery(
  f: SessionListFilters,
  agentId: string | undefined,
  limit: number,
): ListSessionsQuery {
  return {
    ...(agentId !== undefined ? { agentId } : {}),
    ...(f.kinds ? { kinds: f.kinds } : {}),
    ...(f.label !== undefined ? { label: f.label } : {}),
    ...(f.activeMinutes !== undefined ? { activeMinutes: f.activeMinutes } : {}),
    ...(f.search !== undefined ? { search: f.search } : {}),
    limit,
  };
}

/** The caller and everything it spawned, transitively (archived entries are walked but filtered later). */
async function treeOf(services: Services, caller: ToolCaller): Promise<SessionEntry[]> {
  const self = (await services.store.sessions.get(caller.sessionKey)) ?? caller.entry;
  const out: SessionEntry[] = [self];
  const seen = new Set([self.key]);
  let frontier = [self.key];
  for (let depth = 0; depth < MAX_TREE_DEPTH && frontier.length > 0 && out.length < MAX_TREE_NODES; depth++) {
    const next: string[] = [];
    for (const parent of frontier) {
      const children = await services.store.sessions.list({
        spawnedBy: parent,
        includeArchived: true,
        limit: CHILDREN_PER_PARENT,
      });
      for (const c of children) {
        if (seen.has(c.key) || out.length >= MAX_TREE_NODES) continue;
        seen.add(c.key);
        out.push(c);
        next.push(c.key);
      }
    }
    frontier = next;
  }
  return out;
}

/**
 * Up to `limit` visible rows of one store listing. The store applies its limit before we can
 * check visibility, so a page that loses rows to the check is fetched again, larger.
 */
async function pageVisible(
  services: Services,
  caller: ToolCaller,
  f: SessionListFilters,
  agentId: string | undefined,
  limit: number,
): Promise<SessionEntry[]> {
  let want = limit;
  for (;;) {
    const page = await services.store.sessions.list(storeQuery(f, agentId, want));
    const visible: SessionEntry[] = [];
    for (const e of page) {
      if (isReservedKey(e.key)) continue;
      if ((await checkVisible(services, caller, e)).ok) visible.push(e);
      if (visible.length >= limit) return visible;
    }
    if (page.length < want || want >= MAX_SCAN) return visible;
    want = Math.min(MAX_SCAN, want * 4);
  }
}

function newestFirst(a: SessionEntry, b: SessionEntry): number {
  return b.updatedAt - a.updatedAt || (a.key < b.key ? 1 : a.key > b.key ? -1 : 0);
}

/** The visible entries matching `f`, newest first, at most `limit`. */
export async function listVisibleSessions(
  services: Services,
  caller: ToolCaller,
  f: SessionListFilters,
  limit: number,
): Promise<SessionEntry[]> {
  const cfg = services.config;
  const now = services.now();
  const found = new Map<string, SessionEntry>();
  const consider = async (e: SessionEntry | null) => {
    if (!e || found.has(e.key) || isReservedKey(e.key) || !matches(e, f, now)) return;
    if ((await checkVisible(services, caller, e)).ok) found.set(e.key, e);
  };

  // session.scope "global" changes only which key conversations use (the main bucket); sub-agent,
  // cron, hook and node sessions keep their own keys and are listed under the same rules.
  const visibility: Visibility = effectiveVisibility({
    configured: cfg.tools.sessions.visibility,
    sandboxed: caller.sandboxed,
    sessionToolsVisibility: cfg.agents.defaults.sandbox.sessionToolsVisibility,
  });
  // The caller's own tree is visible under every visibility but `self` (and may span agents).
  if (visibility === "self") await consider(await services.store.sessions.get(caller.sessionKey));
  else for (const e of await treeOf(services, caller)) await consider(e);

  const callerAgent = normalizeKey(caller.agentId);
  const crossAgent = visibility === "all" && cfg.tools.agentToAgent.enabled;
  if (visibility === "agent" || (visibility === "all" && !crossAgent)) {
    if (f.agentId === undefined || f.agentId === callerAgent) {
      for (const e of await pageVisible(services, caller, f, callerAgent, limit)) found.set(e.key, e);
    }
  } else if (crossAgent) {
    for (const e of await pageVisible(services, caller, f, f.agentId, limit)) found.set(e.key, e);
  }
  return [...found.values()].sort(newestFirst).slice(0, limit);
}

async function mapLimit<T, R>(items: readonly T[], n: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

/** The last `n` messages of a session through the safe history view (tool results removed, redacted, bounded). */
async function lastMessages(services: Services, e: SessionEntry, n: number): Promise<SessionRow["messages"]> {
  const tail = await services.store.transcripts.readTail(
    { agentId: e.agentId, sessionId: e.sessionId },
    { limit: n, includeTools: false },
  );
  return buildHistoryView(tail, { includeTools: false }).messages.map((m) => ({
    role: m.role,
    content: m.content,
    timestamp: m.timestamp,
  }));
}

export const sessionsListTool = defineTool({
  name: "sessions_list",
  description:
    "List the sessions you can see (newest first): key, kind, channel, label, model, token counts. " +
    "Use the returned `key` with sessions_history, sessions_send and session_status; your own agent's main session is shown as `main`.",
  schema: () => sessionsListSchema,
  async execute(args, { services, caller }) {
    const { filters, limit, messageLimit } = listBounds(args);
    const entries = await listVisibleSessions(services, caller, filters, limit);
    const sessions = await mapLimit(entries, READ_CONCURRENCY, async (e) => {
      const row = toRow(e, services.store.transcripts, displayKey(e.key, caller.agentId));
      if (row.spawnedBy !== undefined) row.spawnedBy = displayKey(row.spawnedBy, caller.agentId);
      if (messageLimit > 0) row.messages = await lastMessages(services, e, messageLimit);
      // Previews only for the rows returned (already visibility-checked): bounded reads per row.
      const ref = { agentId: e.agentId, sessionId: e.sessionId };
      if (args.includeDerivedTitles) {
        const title = await derivedTitle(services.store.transcripts, ref);
        if (title !== undefined) row.derivedTitle = title;
      }
      if (args.includeLastMessage) {
        const last = await lastMessage(services.store.transcripts, ref);
        if (last) row.lastMessage = last;
      }
      return row;
    });
    const messagesTruncated = capMessages(sessions, MAX_TOTAL_MESSAGE_BYTES);
    return { count: sessions.length, sessions, ...(messagesTruncated ? { messagesTruncated: true } : {}) };
  },
});

/**
 * Bounds what `messageLimit` can hand a model in one result (each row's view is already capped
 * at 80 KiB; 200 rows could still be 16 MB): newest rows keep their messages, the rest get none
 * and say so.
 */
function capMessages(rows: SessionRow[], maxBytes: number): boolean {
  let used = 0;
  let truncated = false;
  for (const row of rows) {
    if (!row.messages) continue;
    const bytes = Buffer.byteLength(JSON.stringify(row.messages));
    if (truncated || used + bytes > maxBytes) {
      row.messages = [];
      (row as SessionRow & { messagesOmitted?: boolean }).messagesOmitted = true;
      truncated = true;
      continue;
    }
    used += bytes;
  }
  return truncated;
}
