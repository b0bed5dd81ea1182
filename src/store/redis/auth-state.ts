import type { Redis } from "ioredis";
import { SwitchboardError } from "../../errors.js";
import { RedisKeys } from "./keys.js";

/**
 * A channel account's auth state in Redis: one hash `{prefix}:auth:<channel>:<accountId>`
 * (field = key, value = the adapter's text). A batch is one MULTI/EXEC (HSET + HDEL), so a
 * gateway that dies mid-write leaves the previous state or the new one, never half of it;
 * logout is one DEL. It fits the adapter contract's `AuthStateStore` (checked where src/app wires
 * it in; storage sits below the contracts, so it does not import them).
 */
export class RedisAuthStateStore {
  private readonly key: string;

  constructor(
    private readonly client: Redis,
    prefix: string,
    channel: string,
    accountId: string,
  ) {
    this.key = new RedisKeys(prefix).authState(channel, accountId);
  }

  async get(keys: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (keys.length === 0) return out;
    const values = await this.client.hmget(this.key, ...keys);
    keys.forEach((k, i) => {
      const v = values[i];
      if (typeof v === "string") out.set(k, v);
    });
    return out;
  }

  async set(entries: Readonly<Record<string, string | null>>): Promise<void> {
    const puts: string[] = [];
    const dels: string[] = [];
    for (const [k, v] of Object.entries(entries)) {
      if (v === null) dels.push(k);
      else puts.push(k, v);
    }
    if (puts.length === 0 && dels.length === 0) return;
    const tx = this.client.multi();
    if (puts.length) tx.hset(this.key, ...puts);
    if (dels.length) tx.hdel(this.key, ...dels);
    const res = await tx.exec();
    const failed = res?.find(([err]) => err);
    if (!res || failed) {
      throw new SwitchboardError(
        "UNAVAILABLE",
        `redis auth state write failed: ${failed?.[0]?.message ?? "transaction aborted"}`,
      );
    }
  }

  async isEmpty(): Promise<boolean> {
    return (await this.client.exists(this.key)) === 0;
  }

  async clear(): Promise<void> {
    await this.client.del(this.key);
  }
}
