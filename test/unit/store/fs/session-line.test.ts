import { describe, expect, it } from "vitest";
import { sessionIdHash } from "../../../../src/store/fs/session-index.js";
import { FALLBACK, scanSessionLine } from "../../../../src/store/fs/session-line.js";
import { sessionProblem } from "../../../../src/store/records.js";

const base = {
  key: "agent:main:telegram:group:-1001",
  sessionId: "s-1",
  agentId: "main",
  createdAt: 1_700_000_000_000,
  updatedAt: 1_700_000_100_000,
};

/** What the full path (JSON.parse + the schema) makes of the line, in the scan's terms. */
function fullPath(line: string): unknown {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return "unreadable";
  }
  if (typeof v.del === "string" && v.key === undefined) return { del: v.del };
  if (sessionProblem(v) !== null) return "invalid";
  return {
    key: v.key,
    sid: sessionIdHash(v.sessionId as string),
    agentId: v.agentId,
    updatedAt: v.updatedAt,
    archived: v.archivedAt !== undefined,
    label: v.label,
    spawnedBy: v.spawnedBy,
    displayName: typeof v.displayName === "string" ? v.displayName : undefined,
  };
}

describe("scanSessionLine", () => {
  const lines = [
    JSON.stringify(base),
    JSON.stringify({ ...base, label: "L", spawnedBy: "agent:main:main", displayName: "Ünïcödé 🎉 name" }),
    JSON.stringify({
      ...base,
      archivedAt: 5,
      deliveryContext: { channel: "x", to: 'a"}]{[', key: "nested" },
    }),
    JSON.stringify({ ...base, archivedAt: null }),
    JSON.stringify({ ...base, key: 'we"ird\\key\n', displayName: "tab\there" }),
    JSON.stringify({ subagent: { task: "t", label: "inner" }, ...base, list: [1, [2, { a: "]" }]] }),
    JSON.stringify({ ...base, note: "ends with backslash \\", other: '\\"' }),
    JSON.stringify({ ...base, createdAt: 1.5e3, updatedAt: -0.25 }),
    JSON.stringify({ del: "k1" }),
    // sessionIds hashed from their bytes (ASCII) or decoded first (non-ASCII, escapes)
    JSON.stringify({ ...base, sessionId: "sëssion-ü-1" }),
    '{"key":"k","sessionId":"s\\u0031x","agentId":"a","createdAt":1,"updatedAt":2}',
    '{"key":"k","sessionId":"s\\"q","agentId":"a","createdAt":1,"updatedAt":2}',
    // agent ids reused from recent lines by their bytes, and ones that only look alike
    JSON.stringify({ ...base, agentId: "ops" }),
    JSON.stringify({ ...base, agentId: "ops" }),
    JSON.stringify({ ...base, agentId: "opt" }),
    JSON.stringify({ ...base, agentId: "ops2" }),
    JSON.stringify({ ...base, agentId: "öps" }),
    '{"key":"k","sessionId":"s","agentId":"\\u006fps","createdAt":1,"updatedAt":2}',
    ` { "key" : "k" , "sessionId":"s","agentId":"a","createdAt":1,"updatedAt":2 } `,
    // invalid records and broken lines: the scan must not accept them
    JSON.stringify({ ...base, label: 5 }),
    JSON.stringify({ ...base, label: null }),
    JSON.stringify({ ...base, key: "" }),
    JSON.stringify({ ...base, updatedAt: "1" }),
    JSON.stringify({ ...base, sessionId: undefined }),
    JSON.stringify({ ...base, agentId: { id: "x" } }),
    JSON.stringify({ del: 5 }),
    JSON.stringify({}),
    '{"key":"a","key":"b","sessionId":"s","agentId":"a","createdAt":1,"updatedAt":2}',
    '{"key":"k","sessionId":"s","agentId":"a","createdAt":1,"updatedAt":1e999}',
    '{"key":"k","sessionId":"s","agentId":"a","createdAt":1,"updatedAt":012}',
    '{"key":"k","sessionId":"s","agentId":"a","createdAt":1,"updatedAt":2',
    '{"key":"k","sessionId":"s","agentId":"a","createdAt":1,"updatedAt":2}}',
    '{"ke\\u0079":"k","sessionId":"s","agentId":"a","createdAt":1,"updatedAt":2}',
    "[1,2]",
    "not json",
  ];

  it.each(lines)("agrees with JSON.parse + the schema, or defers to them: %s", (line) => {
    const scanned = scanSessionLine(Buffer.from(line));
    const full = fullPath(line);
    if (scanned === FALLBACK) {
      // deferring is always safe; but plain valid lines must take the fast path
      expect(line === JSON.stringify(base) || line === lines[1]).toBe(false);
      return;
    }
    expect(scanned).toEqual(full);
  });

  it("takes the fast path for the lines the store writes", () => {
    for (const line of lines.slice(0, 10)) expect(scanSessionLine(Buffer.from(line))).not.toBe(FALLBACK);
  });
});
