import { describe, expect, it } from "vitest";
import { KeyedSerial } from "../../../src/store/serial.js";

/** Per-key serial execution used by both store drivers. */

const tick = () => new Promise<void>((r) => setImmediate(r));

describe("KeyedSerial", () => {
  it("runs one key's tasks one after another in call order, other keys alongside", async () => {
    const serial = new KeyedSerial();
    const log: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const a1 = serial.run("a", async () => {
      log.push("a1 start");
      await gate;
      log.push("a1 end");
      return 1;
    });
    const a2 = serial.run("a", async () => {
      log.push("a2");
      return 2;
    });
    const b1 = serial.run("b", async () => {
      log.push("b1");
      return 3;
    });
    await tick();
    expect(log).toEqual(["a1 start", "b1"]); // a2 waits for a1; b does not
    release();
    expect(await Promise.all([a1, a2, b1])).toEqual([1, 2, 3]);
    expect(log).toEqual(["a1 start", "b1", "a1 end", "a2"]);
  });

  it("a failed task rejects its caller only; the key's next task still runs", async () => {
    const serial = new KeyedSerial();
    const failed = serial.run("k", async () => {
      throw new Error("boom");
    });
    const next = serial.run("k", async () => "after");
    await expect(failed).rejects.toThrow("boom");
    expect(await next).toBe("after");
  });

  it("a key whose tasks all settled starts its next task at once, still after the earlier ones", async () => {
    const serial = new KeyedSerial();
    await serial.run("k", async () => 1);
    await tick();
    let started = false;
    const p = serial.run("k", async () => {
      started = true;
    });
    expect(started).toBe(true); // synchronously, as for a key never seen
    await p;
  });

  it("drain waits for every queued task", async () => {
    const serial = new KeyedSerial();
    const done: number[] = [];
    for (let i = 0; i < 5; i++)
      void serial.run(`k${i % 2}`, async () => {
        await tick();
        done.push(i);
      });
    await serial.drain();
    expect(done.sort()).toEqual([0, 1, 2, 3, 4]);
  });

  it("forgets settled keys: 10,000 keys leave at most a few hundred behind", async () => {
    const serial = new KeyedSerial();
    for (let i = 0; i < 10_000; i++) await serial.run(`key${i}`, async () => i);
    await tick();
    expect(serial.size).toBeLessThanOrEqual(256);
    expect(serial.size).toBeGreaterThan(0); // swept in batches, not one by one
  });
});
