import { describe, expect, it } from "vitest";
import { silentLogger } from "../../../src/log.js";
import {
  CODE_ALPHABET,
  MAX_PENDING_PER_ACCOUNT,
  PairingStore,
  pairingReply,
  REQUEST_TTL_MS,
} from "../../../src/routing/pairing.js";
import { createFsStore } from "../../../src/store/fs/index.js";
import { createRedisStore } from "../../../src/store/redis/index.js";
import type { StoreDriver } from "../../../src/store/types.js";
import { randomPrefix, tempDir } from "../../helpers.js";
import { describeRedis, newRedisClient, unlinkMatching } from "../../redis.js";

/** The pairing records on each store driver's key-value space (codes, expiry, cap, approval). */

function pairingContract(
  name: string,
  open: () => Promise<{
    driver: StoreDriver;
    reopen: () => Promise<StoreDriver>;
    cleanup: () => Promise<void>;
  }>,
) {
  it(`${name}: codes, the per-account cap, expiry, approve and deny; approvals persist`, async () => {
    const { driver, reopen, cleanup } = await open();
    let now = 1_800_000_000_000;
    try {
      const p = new PairingStore(driver.kv, () => now);
      const first = await p.request("telegram", "default", "77", "Sam");
      expect(first?.created).toBe(true);
      expect(first?.request.code).toMatch(new RegExp(`^[${CODE_ALPHABET}]{8}$`));
      expect(CODE_ALPHABET).not.toMatch(/[0O1I]/);
      // The same sender keeps their code (no second reply).
      expect(await p.request("telegram", "default", "77")).toMatchObject({
        created: false,
        request: { code: first?.request.code },
      });
      for (let i = 1; i < MAX_PENDING_PER_ACCOUNT; i++)
        expect((await p.request("telegram", "default", `s${i}`))?.created).toBe(true);
      expect(await p.request("telegram", "default", "one-too-many")).toBeNull();
      // Another account has its own cap.
      expect((await p.request("telegram", "work", "x"))?.created).toBe(true);
      expect(
        pairingReply(first?.request ?? { channel: "", accountId: "", senderId: "", code: "", createdAt: 0 }),
      ).toContain(`Pairing code: ${first?.request.code}`);

      await expect(p.approve("slack", first?.request.code ?? "")).rejects.toMatchObject({
        code: "NOT_FOUND",
      });
      const a = await p.approve("telegram", ` ${first?.request.code.toLowerCase()} `);
      expect(a).toMatchObject({ channel: "telegram", accountId: "default", senderId: "77" });
      expect(await p.isApproved("telegram", "default", "77")).toBe(true);
      expect(await p.isApproved("telegram", "work", "77")).toBe(false);
      await expect(p.approve("telegram", first?.request.code ?? "")).rejects.toMatchObject({
        code: "NOT_FOUND",
      });

      const s1 = (await p.pending("telegram")).find((r) => r.senderId === "s1");
      expect((await p.deny("telegram", s1?.code ?? "")).senderId).toBe("s1");
      expect((await p.pending("telegram")).map((r) => r.senderId).sort()).toEqual(["s2", "x"]);

      // Codes expire after an hour: the sender then gets a new one.
      now += REQUEST_TTL_MS;
      expect(await p.pending()).toEqual([]);
      expect((await p.request("telegram", "default", "s2"))?.created).toBe(true);

      const again = new PairingStore((await reopen()).kv, () => now);
      expect((await again.approved()).map((x) => x.senderId)).toEqual(["77"]);
    } finally {
      await cleanup();
    }
  });
}

describe("pairing store (fs)", () => {
  pairingContract("fs", async () => {
    const t = tempDir();
    let driver = await createFsStore({ stateDir: t.dir, logger: silentLogger() });
    return {
      driver,
      reopen: async () => {
        await driver.close();
        driver = await createFsStore({ stateDir: t.dir, logger: silentLogger() });
        return driver;
      },
      cleanup: async () => {
        await driver.close();
        t.cleanup();
      },
    };
  });
});

describeRedis("pairing store (redis)", () => {
  pairingContract("redis", async () => {
    const client = newRedisClient();
    const prefix = randomPrefix("pairing");
    let driver = await createRedisStore({ client, prefix, logger: silentLogger() });
    return {
      driver,
      reopen: async () => {
        driver = await createRedisStore({ client, prefix, logger: silentLogger() });
        return driver;
      },
      cleanup: async () => {
        await unlinkMatching(client, `${prefix}*`);
        await client.quit();
      },
    };
  });
});
