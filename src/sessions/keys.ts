import { randomUUID } from "node:crypto";
import { SwitchboardError } from "../errors.js";
import { BoundedMap } from "../ordered-set.js";
import type { ChatType, SessionKind } from "../store/types.js";

/**
 * The one module that builds and parses session keys (SEMANTICS.md §1). Pure functions only.
 *
 * Key shapes (all lower-case):
 *   agent:<a>:main                                  main bucket (DMs with dmScope "main", scope "global")
 *   agent:<a>:direct:<peer>                         dmScope "per-peer"
 *   agent:<a>:<ch>:direct:<peer>                    dmScope "per-channel-peer"
 *   agent:<a>:<ch>:<account>:direct:<peer>          dmScope "per-account-channel-peer"
 *   agent:<a>:<ch>:group:<id> / agent:<a>:<ch>:channel:<id>
 *   <base>:topic:<topicId>                          Telegram forum topic
 *   <base>:thread:<threadId>                        thread (parsed at the LAST ":thread:")
 *   agent:<a>:subagent:<uuid v4>                    sub-agent (always flat)
 *   cron:<jobId>  hook:<id>  node-<id>              internal sessions (also agent-scoped)
 *
 * `:` inside ids: channel names and account ids are structural segments and must not contain
 * `:` (building throws INVALID_PARAMS). Peer, thread and topic ids may contain `:` (Matrix-style
 * room ids, JIDs); the peer id is everything after the chat-type segment, the topic is read at the
 * last `:topic:` and the thread at the last `:thread:`. The only ambiguity left is an id that itself
 * contains the literal segment `:thread:` or `:topic:`; such ids still build a stable, unique key
 * but parse back differently — a documented limit, not a lost message.
 *
 * Reserved keys: `global` and `unknown`, plus their agent-scoped forms `agent:<a>:global` and
 * `agent:<a>:unknown`. The builder never produces them (scope "global" uses the main bucket), so
 * they are never listed and never valid targets.
 */

export const AGENT_ID_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const UUID_V4_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const RESERVED_KEYS: ReadonlySet<string> = new Set(["global", "unknown"]);
/** Longest key a tool argument may name; real keys are far shorter. */
export const MAX_KEY_LENGTH = 1024;

export type DmScope = "main" | "per-peer" | "per-channel-peer" | "per-account-channel-peer";
export type SessionScope = "per-sender" | "global";

/** Keys are compared in this form. */
export function normalizeKey(key: string): string {
  return key.trim().toLowerCase();
}

/** Trim + lower-case + validate; throws INVALID_PARAMS naming the bad id. */
export function normalizeAgentId(id: string, field = "agentId"): string {
  const norm = String(id).trim().toLowerCase();
  if (!AGENT_ID_RE.test(norm)) {
    throw new SwitchboardError(
      "INVALID_PARAMS",
      `${field}: invalid agent id ${JSON.stringify(id)}; it must match ${AGENT_ID_RE.source}`,
      { details: { field, value: id } },
    );
  }
  return norm;
}

export function mainKey(agentId: string): string {
  return `agent:${normalizeAgentId(agentId)}:main`;
}

// ─── building ────────────────────────────────────────────────────────────────────────────────

export interface BuildSessionKeyInput {
  agentId: string;
  channel: string;
  accountId?: string;
  chatType: ChatType;
  /** DM: the other user; group/channel: the chat id. */
  peerId: string;
  threadId?: string;
  topicId?: string;
  dmScope: DmScope;
  /** `session.identityLinks`: canonical peer → [`<channel>:<peer>` or bare `<peer>`]. */
  identityLinks?: Record<string, string[]>;
  scope?: SessionScope;
}

/** A structural segment (channel, account): lower-case, no `:`. */
function segment(value: string | undefined, field: string, fallback: string): string {
  const v = (value ?? "").trim().toLowerCase();
  if (v === "") return fallback;
  if (v.includes(":")) {
    throw new SwitchboardError(
      "INVALID_PARAMS",
      `${field}: must not contain ":" (got ${JSON.stringify(value)})`,
      {
        details: { field, value },
      },
    );
  }
  return v;
}

/** A peer, chat, thread or topic id as keys hold it: trimmed, lower-case. */
export function idPart(value: string | undefined): string {
  return (value ?? "").trim().toLowerCase();
}

/** Canonical peer from `identityLinks` when `<channel>:<peer>` or the bare peer is listed. */
export function resolveIdentityLink(
  channel: string,
  peerId: string,
  links: Record<string, string[]> | undefined,
): string {
  if (!links) return peerId;
  const scoped = `${channel}:${peerId}`;
  for (const [canonical, entries] of Object.entries(links)) {
    const name = idPart(canonical);
    if (name === "") continue;
    for (const entry of entries) {
      const e = idPart(entry);
      if (e === scoped || e === peerId) return name;
    }
  }
  return peerId;
}

/** The session key for one inbound conversation (SEMANTICS §1 table). */
export function buildSessionKey(input: BuildSessionKeyInput): string {
  const agentId = normalizeAgentId(input.agentId);
  const main = `agent:${agentId}:main`;
  // scope "global": every conversation of the agent shares the main bucket, threads included.
  if (input.scope === "global") return main;

  const channel = segment(input.channel, "channel", "unknown");
  let peer = idPart(input.peerId);
  let base: string;
  if (peer === "") {
    base = main;
  } else if (input.chatType === "direct") {
    if (input.dmScope !== "main") peer = resolveIdentityLink(channel, peer, input.identityLinks);
    switch (input.dmScope) {
      case "main":
        base = main;
        break;
      case "per-peer":
        base = `agent:${agentId}:direct:${peer}`;
        break;
      case "per-channel-peer":
        base = `agent:${agentId}:${channel}:direct:${peer}`;
        break;
      case "per-account-channel-peer":
        base = `agent:${agentId}:${channel}:${segment(input.accountId, "accountId", "default")}:direct:${peer}`;
        break;
    }
  } else {
    base = `agent:${agentId}:${channel}:${input.chatType}:${peer}`;
  }
  const topic = idPart(input.topicId);
  if (topic !== "") base = `${base}:topic:${topic}`;
  const thread = idPart(input.threadId);
  if (thread !== "") base = `${base}:thread:${thread}`;
  return base;
}

export function subagentKey(agentId: string, uuid: string = randomUUID()): string {
  const id = uuid.trim().toLowerCase();
  if (!UUID_V4_RE.test(id)) {
    throw new SwitchboardError(
      "INVALID_PARAMS",
      `uuid: sub-agent keys need a UUID v4 (got ${JSON.stringify(uuid)})`,
      {
        details: { field: "uuid", value: uuid },
      },
    );
  }
  return `agent:${normalizeAgentId(agentId)}:subagent:${id}`;
}

function requiredId(value: string, field: string): string {
  const v = idPart(value);
  if (v === "")
    throw new SwitchboardError("INVALID_PARAMS", `${field}: must not be empty`, { details: { field } });
  return v;
}

export function cronKey(jobId: string): string {
  return `cron:${requiredId(jobId, "jobId")}`;
}

/** `hook:<uuid>` unless the webhook sets its own id. */
export function hookKey(id?: string): string {
  return `hook:${id === undefined ? randomUUID() : requiredId(id, "hookId")}`;
}

export function nodeKey(nodeId: string): string {
  return `node-${requiredId(nodeId, "nodeId")}`;
}

// ─── parsing ─────────────────────────────────────────────────────────────────────────────────

export interface ParsedSessionKey {
  /** The normalised key. */
  key: string;
  /** Set for `agent:<a>:…` keys with a valid agent id. */
  agentId?: string;
  /** The key after `agent:<a>:` (the whole key when not agent-scoped). */
  rest: string;
  /** Thread keys only: the id after the last `:thread:` and the key before it. */
  threadId?: string;
  parentKey?: string;
  /** Forum topic keys: the id after the last `:topic:` and the group key before it. */
  topicId?: string;
  groupKey?: string;
  channel?: string;
  accountId?: string;
  chatType?: ChatType;
  peerId?: string;
}

const CHAT_TYPE_SEGMENTS: Record<string, ChatType> = {
  direct: "direct",
  dm: "direct",
  group: "group",
  channel: "channel",
};

function splitLast(s: string, marker: string): [string, string] | null {
  const i = s.lastIndexOf(marker);
  if (i <= 0) return null;
  const tail = s.slice(i + marker.length);
  return tail === "" ? null : [s.slice(0, i), tail];
}

/**
 * Keys parsed lately, by the raw key: a turn asks for its key's parts half a dozen times (agent,
 * channel, kind, reserved, send policy), and the same keys come back turn after turn.
 */
const parsedKeys = new BoundedMap<string, Readonly<ParsedSessionKey>>(4096);

/**
 * Splits a key into its parts; never throws (unknown shapes just have fewer fields). The result
 * is shared (frozen): copy it to change it.
 */
export function parseSessionKey(rawKey: string): Readonly<ParsedSessionKey> {
  let parsed = parsedKeys.get(rawKey);
  if (parsed === undefined) {
    parsed = Object.freeze(splitKey(rawKey));
    // a key-sized bound, so a stream of odd keys cannot fill memory with long ones
    if (rawKey.length <= MAX_KEY_LENGTH) parsedKeys.set(rawKey, parsed);
  }
  return parsed;
}

function splitKey(rawKey: string): ParsedSessionKey {
  const key = normalizeKey(rawKey);
  const out: ParsedSessionKey = { key, rest: key };
  if (key.startsWith("agent:")) {
    const end = key.indexOf(":", 6);
    const agentId = end === -1 ? "" : key.slice(6, end);
    const rest = end === -1 ? "" : key.slice(end + 1);
    if (AGENT_ID_RE.test(agentId) && rest !== "") {
      out.agentId = agentId;
      out.rest = rest;
    }
  }
  // Markers are searched in `rest` so that an agent named "thread" or "topic" is not a marker.
  const prefix = out.agentId === undefined ? "" : `agent:${out.agentId}:`;
  let base = out.rest;
  const thread = splitLast(base, ":thread:");
  if (thread) {
    out.parentKey = prefix + thread[0];
    out.threadId = thread[1];
    // A thread of a thread: the chat itself is what precedes the first marker.
    const first = thread[0].indexOf(":thread:");
    base = first > 0 ? thread[0].slice(0, first) : thread[0];
  }
  const topic = splitLast(base, ":topic:");
  if (topic) {
    out.topicId = topic[1];
    out.groupKey = prefix + topic[0];
    base = topic[0];
  }
  // Chat-type segment at position 0 (per-peer), 1 (<ch>:…) or 2 (<ch>:<account>:…).
  const parts = base.split(":");
  for (let i = 0; i <= 2 && i < parts.length - 1; i++) {
    const chatType = CHAT_TYPE_SEGMENTS[parts[i] ?? ""];
    if (!chatType) continue;
    const peerId = parts.slice(i + 1).join(":");
    if (peerId === "" || (i === 2 && chatType !== "direct")) break;
    out.chatType = chatType;
    out.peerId = peerId;
    if (i >= 1) out.channel = parts[0];
    if (i === 2) out.accountId = parts[1];
    break;
  }
  return out;
}

export function isThreadKey(key: string): boolean {
  return parseSessionKey(key).threadId !== undefined;
}

export function isReservedKey(key: string): boolean {
  const p = parseSessionKey(key);
  return RESERVED_KEYS.has(p.key) || (p.agentId !== undefined && RESERVED_KEYS.has(p.rest));
}

const INTERNAL_PREFIXES: ReadonlyArray<[string, SessionKind]> = [
  ["cron:", "cron"],
  ["hook:", "hook"],
  ["node-", "node"],
  ["node:", "node"],
];

/** SEMANTICS §1 kind: main / cron / hook / node (also agent-scoped) / group / other. */
export function classifyKind(key: string): SessionKind {
  const p = parseSessionKey(key);
  if (p.agentId !== undefined && p.rest === "main") return "main";
  for (const [prefix, kind] of INTERNAL_PREFIXES) if (p.rest.startsWith(prefix)) return kind;
  if (p.chatType === "group" || p.chatType === "channel") return "group";
  if (p.chatType === "direct") return "other";
  // Unrecognised shapes: the literal rule (a `:group:` or `:channel:` segment anywhere).
  if (p.key.includes(":group:") || p.key.includes(":channel:")) return "group";
  return "other";
}

/** SEMANTICS §1 channel of a row: internal for cron/hook/node, then entry, lastChannel, the key, unknown. */
export function deriveChannel(key: string, entry?: { channel?: string; lastChannel?: string }): string {
  const kind = classifyKind(key);
  if (kind === "cron" || kind === "hook" || kind === "node") return "internal";
  const fromEntry = entry?.channel?.trim() || entry?.lastChannel?.trim();
  if (fromEntry) return fromEntry.toLowerCase();
  return parseSessionKey(key).channel ?? "unknown";
}

/** How tools show a key: the caller agent's main bucket is `main`. */
export function displayKey(key: string, callerAgentId: string): string {
  const norm = normalizeKey(key);
  return norm === `agent:${normalizeKey(callerAgentId)}:main` ? "main" : norm;
}

// ─── tool arguments ──────────────────────────────────────────────────────────────────────────

export type KeyInput =
  | { kind: "key"; key: string }
  | { kind: "sessionId"; id: string }
  | { kind: "error"; error: string };

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const CONTROL_RE = /[\u0000-\u001f\u007f]/;

/**
 * Resolves a tool's `sessionKey` argument (SEMANTICS §1): `main` (and `global` under scope
 * "global") → the caller's main bucket,
 * `current` → the caller, a UUID → a sessionId lookup, reserved → error, else a key. The caller
 * resolves sessionIds (an unknown one is an error telling the model to use the full key).
 */
export function normalizeKeyInput(
  input: string,
  caller: { agentId: string; sessionKey: string },
  opts: { scope?: SessionScope } = {},
): KeyInput {
  const v = normalizeKey(String(input));
  if (v === "") return { kind: "error", error: "sessionKey must not be empty" };
  if (v.length > MAX_KEY_LENGTH) {
    return { kind: "error", error: `sessionKey is too long (${v.length} > ${MAX_KEY_LENGTH} characters)` };
  }
  if (CONTROL_RE.test(v)) return { kind: "error", error: "sessionKey must not contain control characters" };
  // With session.scope "global" every conversation shares the main bucket: `global` is its alias.
  if (v === "main" || (v === "global" && opts.scope === "global")) {
    return { kind: "key", key: `agent:${normalizeKey(caller.agentId)}:main` };
  }
  if (v === "current") return { kind: "key", key: normalizeKey(caller.sessionKey) };
  if (UUID_RE.test(v)) return { kind: "sessionId", id: v };
  if (isReservedKey(v)) {
    return { kind: "error", error: `"${v}" is a reserved session key; use a key from sessions_list` };
  }
  if (v.startsWith("agent:") && parseSessionKey(v).agentId === undefined) {
    return { kind: "error", error: `malformed session key "${v}": expected agent:<agentId>:<rest>` };
  }
  return { kind: "key", key: v };
}
