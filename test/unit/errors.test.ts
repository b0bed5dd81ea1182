import { describe, expect, it } from "vitest";
import { isConnectionError, SwitchboardError } from "../../src/errors.js";

describe("isConnectionError: every Redis/storage outage maps to UNAVAILABLE, never INTERNAL", () => {
  it("knows ioredis' and Redis' wording for 'not now'", () => {
    const transient = [
      "connect ECONNREFUSED 127.0.0.1:6390",
      "Connection is closed.",
      'Reached the max retries per request limit (which is 1). Refer to "maxRetriesPerRequest" option for details.',
      "Stream isn't writeable and enableOfflineQueue options is false",
      "Command timed out",
      "LOADING Redis is loading the dataset in memory",
      "READONLY You can't write against a read only replica.",
      "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
      "TRYAGAIN Multiple keys request during rehashing of slot",
      "CLUSTERDOWN The cluster is down",
      "BUSY Redis is busy running a script.",
    ];
    for (const m of transient) expect(isConnectionError(new Error(m)), m).toBe(true);
    const named = Object.assign(new Error("whatever"), { name: "MaxRetriesPerRequestError" });
    expect(isConnectionError(named)).toBe(true);
    expect(isConnectionError(new SwitchboardError("STORAGE_UNAVAILABLE", "disk full"))).toBe(true);
    expect(isConnectionError(new SwitchboardError("UNAVAILABLE", "down"))).toBe(true);
  });

  it("does not mistake real bugs for outages", () => {
    for (const m of ["ERR wrong number of arguments", "WRONGTYPE Operation against a key", "x is undefined"])
      expect(isConnectionError(new Error(m)), m).toBe(false);
    expect(isConnectionError(new SwitchboardError("INTERNAL", "bug"))).toBe(false);
    expect(isConnectionError("string")).toBe(false);
  });
});
