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

describeRedis("takeTurn-4 counts the turn's live audience", () => {
  const client = newRedisClient();
  afterAll(async () => {
    await client.quit();
  });

  it("counts other gateways whose membership has not expired; -1 when not asked", async () => {
    const { takeTurn } = await import("../../../src/redis/commands/pipeline.js");
    const p = `{t${randomUUID()}}`;
    const runner = new ScriptRunner(client, "test");
    const audienceKey = `${p}:live:audience`;
    const now = Date.now();
    const written = [audienceKey, `${p}:mb:s`, `${p}:act:s`];
    const take = async (member: string) => {
      const id = randomUUID();
      written.push(`${p}:run:${id}`);
      await client.rpush(`${p}:mb:s`, id);
      await client.hset(`${p}:run:${id}`, "env", "{}");
      const reply = (await runner.run(
        takeTurn,
        [`${p}:act:s`, `${p}:mb:s`, `${p}:sched:s`, audienceKey],
        ["job1", `${p}:run:`, `${p}:cancel:`, `${p}:pipeline:`, 0, member, "", 0],
      )) as unknown[];
      await client.del(`${p}:act:s`);
      expect(reply.slice(0, 4)).toEqual(["new", 1, expect.any(Number), 1]);
      expect(reply[4]).toBe(id);
      return reply[2];
    };
    expect(await take("me")).toBe(0); // no zset yet
    await client.zadd(audienceKey, now + 60_000, "me", now - 1_000, "gone", now + 60_000, "other");
    expect(await take("me")).toBe(1); // "other": "me" sees its own clients without Redis, "gone" expired
    expect(await take("other")).toBe(1);
    expect(await take("nobody")).toBe(2);
    expect(await take("")).toBe(-1);
    await client.zrem(audienceKey, "other");
    expect(await take("me")).toBe(0);
    await client.del(...written);
  });
});
