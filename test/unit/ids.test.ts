import { describe, expect, it } from "vitest";
import { isolatedRunKey } from "../../src/cron/service.js";
import { uuidFrom } from "../../src/ids.js";
import { subagentKey } from "../../src/sessions/keys.js";

/**
 * Ids derived from seeds end up in stored session keys and run ids, so the derivation must never
 * change. Until round 3 there were two `uuidFrom`s (sessions/keys.ts and cron/service.ts; they
 * agreed bit for bit). These keys and ids were written by them, recorded before the move to
 * src/ids.ts; the one function left must still find them.
 */
describe("uuidFrom reads the keys the old functions wrote", () => {
  it("a cron tick's isolated session (cron/service.ts's old uuidFrom)", () => {
    expect(isolatedRunKey("daily", "run-7f3a")).toBe("cron:daily:run:7839d25a-6b0d-4960-a9e7-bb4ce3b498a2");
  });

  it("a spawned child's key and a routed message's run (sessions/keys.ts's old uuidFrom)", () => {
    expect(subagentKey("main", uuidFrom("eff-1:spawn:key"))).toBe(
      "agent:main:subagent:852fd3d8-c773-4b25-a858-9f43c18cd04f",
    );
    expect(uuidFrom("telegram:default:-1001:42")).toBe("2a45f2b6-aee4-4efb-9cb1-938a28a265c1");
  });

  it("is a UUID v4 layout for any seed, the empty one and non-ASCII ones included", () => {
    expect(uuidFrom("")).toBe("e3b0c442-98fc-4c14-9afb-f4c8996fb924");
    expect(uuidFrom("ü🎉")).toBe("bccd39f8-50f2-45ff-82e4-b4f556b00f15");
    for (const seed of ["a", "b", "x".repeat(1000)])
      expect(uuidFrom(seed)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
