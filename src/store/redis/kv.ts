import type { Redis } from "ioredis";
import { InvalidParamsError } from "../../errors.js";
import type { KeyValueStore } from "../types.js";
import type { RedisKeys } from "./keys.js";
import type { WarningSink } from "./warnings.js";

/** HSCAN page size for `list` (namespaces hold small record sets; this bounds one reply). */
const SCAN_COUNT = 500;

/**
 * Small JSON values, one hash per namespace (field = key, value = JSON text). Values are
 * stored as JSON, so reads return fresh copies and a value that cannot be serialised is
 * refused up front. Commands on one connection run in issue order, so a delete issued right
 * after a set wins.
 */
export class RedisKeyValueStore implements KeyValueStore {
  constructor(
    private readonly client: Redis,
    private readonly keys: RedisKeys,
    private readonly warnings: WarningSink,
  ) {}

  async get<T>(namespace: string, key: string): Promise<T | null> {
    checkNames(namespace, key);
    return this.decode<T>(namespace, key, await this.client.hget(this.keys.kv(namespace), key));
  }

  set<T>(namespace: string, key: string, value: T): Promise<void> {
    try {
      checkNames(namespace, key);
      const text = encode(value);
      return this.client.hset(this.keys.kv(namespace), key, text).then(() => undefined);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  delete(namespace: string, key: string): Promise<void> {
    try {
      checkNames(namespace, key);
      return this.client.hdel(this.keys.kv(namespace), key).then(() => undefined);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Every record of the namespace, in no particular order. */
  async list<T>(namespace: string): Promise<Array<{ key: string; value: T }>> {
    checkNames(namespace, "-");
    const hash = this.keys.kv(namespace);
    const out = new Map<string, T>();
    let cursor = "0";
    do {
      const [next, flat] = await this.client.hscan(hash, cursor, "COUNT", SCAN_COUNT);
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const value = this.decode<T>(namespace, flat[i]!, flat[i + 1]!);
        if (value !== null) out.set(flat[i]!, value); // HSCAN may repeat a field; keep one
      }
      cursor = next;
    } while (cursor !== "0");
    return [...out].map(([key, value]) => ({ key, value }));
  }

  private decode<T>(namespace: string, key: string, text: string | null): T | null {
    if (text === null) return null;
    try {
      return JSON.parse(text) as T;
    } catch {
      this.warnings.add(`redis store: kv ${namespace}/${key}: unreadable value skipped`, { namespace, key });
      return null;
    }
  }
}

function encode(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new InvalidParamsError(`value: not JSON-serialisable (${(err as Error).message})`, {
      field: "value",
    });
  }
  if (text === undefined)
    throw new InvalidParamsError("value: not JSON-serialisable (undefined)", { field: "value" });
  return text;
}

function checkNames(namespace: string, key: string): void {
  if (typeof namespace !== "string" || namespace.length === 0) {
    throw new InvalidParamsError("namespace: must be a non-empty string", { field: "namespace" });
  }
  if (typeof key !== "string" || key.length === 0) {
    throw new InvalidParamsError("key: must be a non-empty string", { field: "key" });
  }
}
