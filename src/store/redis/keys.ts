import { InvalidParamsError } from "../../errors.js";

/**
 * The one place that builds (and parses) every Redis key of the redis store. All keys of one
 * store start with the Cluster hash tag `{<prefix>}`, so they share a slot and multi-key
 * scripts stay legal on Redis Cluster.
 *
 * Layout (`P` = `{<prefix>}`):
 *
 *   P:sess:<sessionKey>                 hash    data (entry JSON), rev, ix (what it is indexed under)
 *   P:idx:sid                           hash    sessionId → session key
 *   P:idx:live / P:idx:arch             zset    session keys by updatedAt (live / archived)
 *   P:idx:agent:live:<agentId>          zset    the same per agent (…:arch:… for archived)
 *   P:idx:label:<label>                 zset    session keys with that exact label, by updatedAt
 *   P:idx:parent:<spawnedBy>            zset    child session keys, by updatedAt
 *   P:tr:<agentId*>:<sessionId*>        stream  transcript (fields `r` = role, `m` = message JSON)
 *   <transcript>:ids                    set     ids of the live transcript's messages (append dedupe)
 *   <transcript>:archived:<reason>:<ts> stream  an archived transcript (renamed, kept)
 *   P:run:<runId>                       hash    data (run JSON), rev, ix
 *   P:runs:sess:<sessionKey>            zset    runIds by createdAt
 *   P:outbox:<id>                       string  `{"state":"claimed"}` or the completed record
 *   P:kv:<namespace>                    hash    key → value JSON
 *   P:auth:<channel*>:<accountId>       hash    a channel account's auth state (key → text)
 *   P:usage:<period key>:<dimension>    hash    usage counts (usage/redis-counts.ts): `<id>|c` cost,
 *                                               `|i` `|o` tokens, `|r` runs per id of the dimension
 *
 * The variable part is the last segment wherever possible, so it needs no escaping. `*` marks
 * segments followed by another one: there `%` → `%25` and `:` → `%3A`, which keeps every key
 * unambiguous (and parseable) whatever the ids contain.
 */
export class RedisKeys {
  /** `{<prefix>}` — the hash tag every key starts with. */
  readonly tag: string;
  private readonly head: string;

  constructor(readonly prefix: string) {
    if (typeof prefix !== "string" || prefix.length === 0 || /[{}\s]/.test(prefix)) {
      throw new InvalidParamsError(
        `prefix: must be a non-empty string without braces or whitespace (got ${JSON.stringify(prefix)})`,
        { field: "prefix" },
      );
    }
    this.tag = `{${prefix}}`;
    this.head = `${this.tag}:`;
  }

  // ---------------------------------------------------------------- sessions

  session(sessionKey: string): string {
    return `${this.head}sess:${sessionKey}`;
  }

  sessionIdIndex(): string {
    return `${this.head}idx:sid`;
  }

  /** Every entry is in exactly one of the two global zsets: live, or archived (`archivedAt` set). */
  allSessions(archived: boolean): string {
    return `${this.head}idx:${archived ? "arch" : "live"}`;
  }

  agentSessions(agentId: string, archived: boolean): string {
    return `${this.head}idx:agent:${archived ? "arch" : "live"}:${agentId}`;
  }

  labelIndex(label: string): string {
    return `${this.head}idx:label:${label}`;
  }

  parentIndex(spawnedBy: string): string {
    return `${this.head}idx:parent:${spawnedBy}`;
  }

  // ---------------------------------------------------------------- transcripts

  transcript(agentId: string, sessionId: string): string {
    return `${this.head}tr:${escapeSegment(agentId)}:${escapeSegment(sessionId)}`;
  }

  /** The ids of a live transcript's messages (an append of a known id is a no-op). */
  transcriptIds(agentId: string, sessionId: string): string {
    return `${this.transcript(agentId, sessionId)}:ids`;
  }

  archivedTranscript(agentId: string, sessionId: string, reason: string, stamp: string): string {
    return `${this.transcript(agentId, sessionId)}:archived:${reason}:${stamp}`;
  }

  // ---------------------------------------------------------------- runs, outbox, kv

  run(runId: string): string {
    return `${this.head}run:${runId}`;
  }

  sessionRuns(sessionKey: string): string {
    return `${this.head}runs:sess:${sessionKey}`;
  }

  outbox(id: string): string {
    return `${this.head}outbox:${id}`;
  }

  kv(namespace: string): string {
    return `${this.head}kv:${namespace}`;
  }

  /** A channel account's auth state (WhatsApp creds and signal keys). */
  authState(channel: string, accountId: string): string {
    return `${this.head}auth:${escapeSegment(channel)}:${accountId}`;
  }

  /**
   * Usage counts of one period (`day:2026-12-06`, `month:2026-12`) and dimension (`global`,
   * `agent`, `session`, `channel`, `model`).
   */
  usage(period: string, dimension: string): string {
    return `${this.head}usage:${period}:${dimension}`;
  }

  // ---------------------------------------------------------------- whole store

  /** SCAN MATCH pattern covering every key of this store (glob metacharacters escaped). */
  pattern(): string {
    return `${this.head.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`;
  }

  /** What a key of this store names; null for a key this store does not build. */
  parse(key: string): ParsedKey | null {
    if (!key.startsWith(this.head)) return null;
    const rest = key.slice(this.head.length);
    if (rest === "idx:sid") return { type: "sessionIdIndex" };
    if (rest === "idx:live" || rest === "idx:arch")
      return { type: "allSessions", archived: rest === "idx:arch" };
    for (const [head, make] of TAILS) if (rest.startsWith(head)) return make(rest.slice(head.length));
    return null;
  }
}

/** Keys whose variable part follows a fixed head (checked in order). */
const TAILS: ReadonlyArray<[string, (v: string) => ParsedKey | null]> = [
  ["sess:", (v) => ({ type: "session", sessionKey: v })],
  ["idx:agent:live:", (v) => ({ type: "agentSessions", agentId: v, archived: false })],
  ["idx:agent:arch:", (v) => ({ type: "agentSessions", agentId: v, archived: true })],
  ["idx:label:", (v) => ({ type: "labelIndex", label: v })],
  ["idx:parent:", (v) => ({ type: "parentIndex", spawnedBy: v })],
  ["tr:", (v) => parseTranscript(v)],
  ["run:", (v) => ({ type: "run", runId: v })],
  ["runs:sess:", (v) => ({ type: "sessionRuns", sessionKey: v })],
  ["outbox:", (v) => ({ type: "outbox", id: v })],
  ["kv:", (v) => ({ type: "kv", namespace: v })],
  ["usage:", (v) => parseUsage(v)],
];

export type ParsedKey =
  | { type: "session"; sessionKey: string }
  | { type: "sessionIdIndex" }
  | { type: "allSessions"; archived: boolean }
  | { type: "agentSessions"; agentId: string; archived: boolean }
  | { type: "labelIndex"; label: string }
  | { type: "parentIndex"; spawnedBy: string }
  | { type: "transcript"; agentId: string; sessionId: string }
  | { type: "transcriptIds"; agentId: string; sessionId: string }
  | { type: "archivedTranscript"; agentId: string; sessionId: string; reason: string; stamp: string }
  | { type: "run"; runId: string }
  | { type: "sessionRuns"; sessionKey: string }
  | { type: "outbox"; id: string }
  | { type: "kv"; namespace: string }
  | { type: "usage"; period: string; dimension: string };

function parseUsage(rest: string): ParsedKey | null {
  const cut = rest.lastIndexOf(":");
  return cut < 0 ? null : { type: "usage", period: rest.slice(0, cut), dimension: rest.slice(cut + 1) };
}

function parseTranscript(rest: string): ParsedKey | null {
  const parts = rest.split(":");
  if (parts.length === 2) {
    return { type: "transcript", agentId: unescapeSegment(parts[0]!), sessionId: unescapeSegment(parts[1]!) };
  }
  if (parts.length === 3 && parts[2] === "ids") {
    return {
      type: "transcriptIds",
      agentId: unescapeSegment(parts[0]!),
      sessionId: unescapeSegment(parts[1]!),
    };
  }
  if (parts.length >= 5 && parts[2] === "archived") {
    return {
      type: "archivedTranscript",
      agentId: unescapeSegment(parts[0]!),
      sessionId: unescapeSegment(parts[1]!),
      reason: parts[3]!,
      stamp: parts.slice(4).join(":"),
    };
  }
  return null;
}

function escapeSegment(s: string): string {
  return s.replace(/%/g, "%25").replace(/:/g, "%3A");
}

function unescapeSegment(s: string): string {
  return s.replace(/%(25|3A)/g, (m) => (m === "%25" ? "%" : ":"));
}
