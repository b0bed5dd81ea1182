import { randomUUID } from "node:crypto";
import { afterAll, expect, it } from "vitest";
import { PIPELINE_SCRIPTS } from "../../../src/redis/commands/pipeline.js";
import { STORE_SCRIPTS } from "../../../src/redis/commands/store.js";
import { ScriptRunner } from "../../../src/redis/scripts.js";
import { describeRedis, newRedisClient } from "../../redis.js";

const ALL = [...STORE_SCRIPTS, ...PIPELINE_SCRIPTS];

it("every command is named <operation>-<number of keys>, once", () => {
  for (const d of ALL) expect(d.name).toBe(`${d.name.split("-")[0]}-${d.numberOfKeys}`);
  expect(new Set(ALL.map((d) => d.name)).size).toBe(ALL.length);
});

describeRedis("the Lua script runner", () => {
  const client = newRedisClient();
  afterAll(async () => {
    await client.quit();
  });

  it("loads every store and pipeline script (each compiles) with the sha it runs by", async () => {
    const runner = new ScriptRunner(client, "test");
    await runner.load(ALL);
    for (const d of ALL) expect(await client.script("EXISTS", runner.sha(d))).toEqual([1]);
  });

  it("a script missing from the server cache runs through EVAL, then by sha", async () => {
    const runner = new ScriptRunner(client, "test");
    const fresh = { name: "probe-0", numberOfKeys: 0, lua: `return "${randomUUID()}"` };
    expect(await client.script("EXISTS", runner.sha(fresh))).toEqual([0]);
    const r = await runner.run(fresh, [], []);
    expect(typeof r).toBe("string");
    expect(await client.script("EXISTS", runner.sha(fresh))).toEqual([1]);
    expect(await runner.run(fresh, [], [])).toBe(r);
  });

  it("refuses a call with the wrong number of keys, naming its owner and the script", async () => {
    const runner = new ScriptRunner(client, "bullmq pipeline");
    const def = PIPELINE_SCRIPTS.find((d) => d.name === "sweepSession-3");
    if (!def) throw new Error("sweepSession-3 missing");
    await expect(runner.run(def, ["a"], [])).rejects.toThrow(
      "bullmq pipeline: sweepSession-3 takes 3 keys, got 1",
    );
  });
});
