import { describe, expect, it } from "vitest";
import {
  RUN_STATUSES,
  recordProblem,
  runFits,
  runProblem,
  sessionFits,
  sessionProblem,
  storedRunSchema,
  storedSessionSchema,
} from "../../../src/store/records.js";
import { seededRandom } from "../../helpers.js";

/** Values a field may hold: right, wrong and borderline ones. */
const VALUES: unknown[] = [
  "a",
  "",
  "agent:main:x",
  0,
  -1,
  1_700_000_000_000,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  null,
  undefined,
  true,
  {},
  [],
  ["a"],
  ...RUN_STATUSES,
  "done",
  "QUEUED",
];

function record(fields: readonly string[], next: () => number, good: Record<string, unknown>): unknown {
  const roll = next();
  if (roll < 0.03) return VALUES[Math.floor(next() * VALUES.length)];
  const r: Record<string, unknown> = { ...good, extra: { nested: true } };
  // change 0–2 fields, or drop one
  for (let k = Math.floor(next() * 3); k > 0; k--) {
    const f = fields[Math.floor(next() * fields.length)]!;
    if (next() < 0.2) delete r[f];
    else r[f] = VALUES[Math.floor(next() * VALUES.length)];
  }
  return r;
}

describe("store record checks", () => {
  it("the hand checks agree with the zod schemas on every case, and a refusal still names the field", () => {
    const next = seededRandom(18);
    const session = {
      key: "agent:main:x",
      sessionId: "s1",
      agentId: "main",
      createdAt: 1,
      updatedAt: 2,
      label: "l",
      spawnedBy: "agent:main:y",
    };
    const run = { runId: "r1", sessionKey: "agent:main:x", agentId: "main", status: "ok", createdAt: 1 };
    let accepted = 0;
    let refused = 0;
    for (let i = 0; i < 4000; i++) {
      const s = record(Object.keys(session), next, session);
      const zs = storedSessionSchema.safeParse(s).success;
      expect(sessionFits(s), JSON.stringify(s)).toBe(zs);
      expect(sessionProblem(s)).toBe(recordProblem(storedSessionSchema, s));
      const r = record(Object.keys(run), next, run);
      const zr = storedRunSchema.safeParse(r).success;
      expect(runFits(r), JSON.stringify(r)).toBe(zr);
      expect(runProblem(r)).toBe(recordProblem(storedRunSchema, r));
      if (zs) accepted++;
      else refused++;
    }
    // both verdicts were exercised many times
    expect(accepted).toBeGreaterThan(500);
    expect(refused).toBeGreaterThan(500);
    expect(runProblem({ ...run, createdAt: Number.NaN })).toBe("createdAt: must be a finite number (ms)");
    expect(sessionProblem({ ...session, key: "" })).toBe("key: must be a non-empty string");
  });
});
