/**
 * Reads the index fields of one `sessions/index.jsonl` line straight from its bytes, without
 * building the whole entry: at a million sessions a full `JSON.parse` of every line is most of
 * the start-up time and its objects most of the memory. The scan walks the top-level members
 * of the object, keeps the few the index needs and skips the rest (nested values by depth).
 *
 * It answers only when it is sure: anything unusual — an escape in a member name, a second
 * copy of a kept member, a kept member of the wrong type, bytes that are not JSON where it
 * looks — returns FALLBACK, and the caller parses the line in full and validates it as before
 * (so invalid records are still skipped with the same warnings). For the members it keeps it
 * applies the same rules as `storedSessionSchema` (src/store/records.ts), which checks nothing
 * else, so a line it accepts is a valid record.
 */
import { FNV_BASIS, FNV_PRIME } from "../../hash.js";
import { sessionIdHash } from "./session-index.js";

export const FALLBACK: unique symbol = Symbol("fallback");

export interface ScannedSession {
  key: string;
  sid: number;
  agentId: string;
  updatedAt: number;
  archived: boolean;
  label: string | undefined;
  spawnedBy: string | undefined;
  displayName: string | undefined;
}

export type ScannedLine = ScannedSession | { del: string } | typeof FALLBACK;

const Q = 0x22;
const BS = 0x5c;

// kept members, as bit flags
const KEY = 1;
const SID = 2;
const AGENT = 4;
const CREATED = 8;
const UPDATED = 16;
const ARCHIVED = 32;
const LABEL = 64;
const SPAWNED = 128;
const DISPLAY = 256;
const DEL = 512;

const NAMES: Array<[number, Buffer]> = (
  [
    [KEY, "key"],
    [SID, "sessionId"],
    [AGENT, "agentId"],
    [CREATED, "createdAt"],
    [UPDATED, "updatedAt"],
    [ARCHIVED, "archivedAt"],
    [LABEL, "label"],
    [SPAWNED, "spawnedBy"],
    [DISPLAY, "displayName"],
    [DEL, "del"],
  ] as Array<[number, string]>
).map(([f, n]) => [f, Buffer.from(n)]);

/**
 * The FNV-1a `sessionIdHash` of a string value's bytes `b[s..e)` without decoding it, when
 * every byte is ASCII without escapes (a UUID): then bytes and UTF-16 code units agree. null
 * otherwise (the caller decodes the string).
 */
function asciiHash(b: Buffer, s: number, e: number): number | null {
  let h = FNV_BASIS;
  for (let i = s; i < e; i++) {
    const c = b[i]!;
    if (c >= 0x80 || c === BS) return null;
    h = Math.imul(h ^ c, FNV_PRIME);
  }
  return h | 0;
}

/** The last few agent ids seen, by their bytes: most lines repeat one of them. */
const recentAgents: Array<{ bytes: Buffer; str: string }> = [];

/** The agent id in `b[s..e)` when it is one of the recent ones (no decoding), else undefined. */
function recentAgent(b: Buffer, s: number, e: number): string | undefined {
  const len = e - s;
  for (const a of recentAgents) {
    if (a.bytes.length === len && b.compare(a.bytes, 0, len, s, e) === 0) return a.str;
  }
  return undefined;
}

function rememberAgent(b: Buffer, s: number, e: number, str: string): void {
  if (recentAgents.length >= 8) recentAgents.shift();
  recentAgents.push({ bytes: Buffer.from(b.subarray(s, e)), str });
}

/** Strings kept by many entries (agent ids, parents) share one copy. */
const intern = new Map<string, string>();
function interned(s: string): string {
  const hit = intern.get(s);
  if (hit !== undefined) return hit;
  if (intern.size < 10_000) intern.set(s, s);
  return s;
}

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Whether the quote at `q` is escaped (an odd run of backslashes before it). */
function isEscaped(b: Buffer, q: number): boolean {
  let k = q - 1;
  while (b[k] === BS) k--;
  return (q - 1 - k) % 2 === 1;
}

/** The kept names by length (no iterator or destructuring per member: this runs ~15× a line). */
const BY_LENGTH: Array<Array<{ flag: number; name: Buffer }> | undefined> = [];
for (const [flag, name] of NAMES) {
  const list = BY_LENGTH[name.length] ?? [];
  list.push({ flag, name });
  BY_LENGTH[name.length] = list;
}

/** Which kept member the name `b[s..e)` is (0: none). */
function memberFlag(b: Buffer, s: number, e: number): number {
  const candidates = BY_LENGTH[e - s];
  if (candidates === undefined) return 0;
  for (let c = 0; c < candidates.length; c++) {
    const { flag, name } = candidates[c]!;
    let i = 0;
    while (i < name.length && name[i] === b[s + i]) i++;
    if (i === name.length) return flag;
  }
  return 0;
}

const NUMBER_RE = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

export function scanSessionLine(b: Buffer): ScannedLine {
  const n = b.length;
  let i = 0;
  while (i < n && isWs(b[i]!)) i++;
  if (b[i] !== 0x7b) return FALLBACK;
  i++;
  let seen = 0;
  let key: string | undefined;
  let sessionId = 0;
  let agentId: string | undefined;
  let updatedAt = 0;
  let label: string | undefined;
  let spawnedBy: string | undefined;
  let displayName: string | undefined;
  let del: string | undefined;
  for (;;) {
    while (i < n && isWs(b[i]!)) i++;
    if (b[i] !== Q) return FALLBACK; // includes `{}`: not a valid record anyway
    // member name (no escapes on this path)
    const ns = i + 1;
    let ne = ns;
    while (ne < n && b[ne] !== Q) {
      if (b[ne] === BS || b[ne]! < 0x20) return FALLBACK;
      ne++;
    }
    if (ne >= n) return FALLBACK;
    const flag = memberFlag(b, ns, ne);
    if (flag !== 0) {
      if (seen & flag) return FALLBACK; // a repeated member: let JSON.parse decide which wins
      seen |= flag;
    }
    i = ne + 1;
    while (i < n && isWs(b[i]!)) i++;
    if (b[i] !== 0x3a) return FALLBACK;
    i++;
    while (i < n && isWs(b[i]!)) i++;
    const c = b[i];
    if (c === Q && flag === 0) {
      // a string nobody keeps: jump quote to quote (memchr), past escaped ones
      let j = b.indexOf(Q, i + 1);
      while (j !== -1 && isEscaped(b, j)) j = b.indexOf(Q, j + 1);
      if (j === -1) return FALLBACK;
      i = j + 1;
    } else if (c === Q) {
      // a kept string (or a member that must not be one)
      if (flag === CREATED || flag === UPDATED) return FALLBACK; // not a number: invalid
      let j = b.indexOf(Q, i + 1);
      while (j !== -1 && isEscaped(b, j)) j = b.indexOf(Q, j + 1);
      if (j === -1) return FALLBACK;
      const vs = i + 1;
      i = j + 1;
      // the common cases without decoding: an ASCII sessionId is only hashed, and an agent id
      // is usually the one of a recent line
      let quick = flag === ARCHIVED; // its value is not kept
      if (flag === SID && j > vs) {
        const h = asciiHash(b, vs, j);
        if (h !== null) {
          sessionId = h;
          quick = true;
        }
      } else if (flag === AGENT) {
        const hit = recentAgent(b, vs, j);
        if (hit !== undefined) {
          agentId = hit;
          quick = true;
        }
      }
      if (!quick) {
        let str = b.toString("utf8", vs, j);
        if (str.includes("\\")) {
          try {
            str = JSON.parse(b.toString("utf8", vs - 1, j + 1)) as string;
          } catch {
            return FALLBACK;
          }
        }
        switch (flag) {
          case KEY:
            key = str;
            break;
          case SID:
            sessionId = sessionIdHash(str);
            if (str.length === 0) return FALLBACK;
            break;
          case AGENT:
            agentId = interned(str);
            rememberAgent(b, vs, j, agentId);
            break;
          case LABEL:
            label = str;
            break;
          case SPAWNED:
            spawnedBy = interned(str);
            break;
          case DISPLAY:
            displayName = str;
            break;
          case DEL:
            del = str;
            break;
        }
      }
    } else if (c === 0x7b || c === 0x5b) {
      // a nested value: skip to its end (strings may hold brackets)
      if (flag !== 0 && flag !== ARCHIVED && flag !== DISPLAY) return FALLBACK;
      let depth = 0;
      for (;;) {
        if (i >= n) return FALLBACK;
        const d = b[i]!;
        if (d === Q) {
          i++;
          while (i < n && b[i] !== Q) i += b[i] === BS ? 2 : 1;
          if (i >= n) return FALLBACK;
        } else if (d === 0x7b || d === 0x5b) depth++;
        else if (d === 0x7d || d === 0x5d) {
          depth--;
          if (depth === 0) {
            i++;
            break;
          }
        }
        i++;
      }
      if (flag === DISPLAY) return FALLBACK;
    } else {
      // a number or a literal
      const vs = i;
      while (i < n) {
        const d = b[i]!;
        if (d === 0x2c || d === 0x7d || isWs(d)) break;
        i++;
      }
      if (i === vs) return FALLBACK;
      if (flag === CREATED || flag === UPDATED) {
        const v = integerAt(b, vs, i) ?? numberAt(b, vs, i);
        if (v === null) return FALLBACK;
        if (flag === UPDATED) updatedAt = v;
      } else if (flag !== 0 && flag !== ARCHIVED)
        return FALLBACK; // a kept string member that is not one
      else if (!isLiteral(b, vs, i)) return FALLBACK;
    }
    while (i < n && isWs(b[i]!)) i++;
    if (b[i] === 0x2c) {
      i++;
      continue;
    }
    if (b[i] !== 0x7d) return FALLBACK;
    i++;
    while (i < n && isWs(b[i]!)) i++;
    if (i !== n) return FALLBACK;
    break;
  }
  if (!(seen & KEY)) return del !== undefined ? { del } : FALLBACK;
  const required = KEY | SID | AGENT | CREATED | UPDATED;
  if ((seen & required) !== required || !key || !agentId) return FALLBACK;
  return {
    key,
    sid: sessionId,
    agentId,
    updatedAt,
    archived: (seen & ARCHIVED) !== 0,
    label,
    spawnedBy,
    displayName,
  };
}

/** A plain integer (no leading zero, ≤ 15 digits), or null. */
function integerAt(b: Buffer, s: number, e: number): number | null {
  let i = s;
  const neg = b[i] === 0x2d;
  if (neg) i++;
  const len = e - i;
  if (len < 1 || len > 15 || (b[i] === 0x30 && len > 1)) return null;
  let v = 0;
  for (; i < e; i++) {
    const d = b[i]! - 0x30;
    if (d < 0 || d > 9) return null;
    v = v * 10 + d;
  }
  return neg ? -v : v;
}

/** Any JSON number, or null (not one, or not finite). */
function numberAt(b: Buffer, s: number, e: number): number | null {
  const text = b.toString("latin1", s, e);
  if (!NUMBER_RE.test(text)) return null;
  const v = Number(text);
  return Number.isFinite(v) ? v : null;
}

const TRUE = Buffer.from("true");
const FALSE = Buffer.from("false");
const NULL = Buffer.from("null");

/**
 * Whether `b[s..e)` is exactly a JSON number or true/false/null: a skipped value is checked too,
 * so a line JSON.parse refuses is never read as a record (found by the property test).
 */
function isLiteral(b: Buffer, s: number, e: number): boolean {
  const c = b[s]!;
  if (c === 0x74) return e - s === 4 && b.compare(TRUE, 0, 4, s, e) === 0;
  if (c === 0x66) return e - s === 5 && b.compare(FALSE, 0, 5, s, e) === 0;
  if (c === 0x6e) return e - s === 4 && b.compare(NULL, 0, 4, s, e) === 0;
  return integerAt(b, s, e) !== null || NUMBER_RE.test(b.toString("latin1", s, e));
}
