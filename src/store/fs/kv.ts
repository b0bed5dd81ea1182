import { InvalidParamsError } from "../../errors.js";
import { Journal } from "../../journal/index.js";
import type { Logger } from "../../log.js";
import type { KeyValueStore } from "../types.js";
import type { WarningSink } from "../warnings.js";

type KvRecord =
  | { op: "set"; ns: string; key: string; value: unknown }
  | { op: "del"; ns: string; key: string };

export interface FsKeyValueStoreOptions {
  dir: string;
  logger: Logger;
  warnings: WarningSink;
  compactEveryAppends: number;
}

/**
 * Small JSON values journaled to `kv/kv.jsonl`. Values are kept as JSON text, so every read
 * returns a fresh copy and a value that cannot be serialised is refused up front.
 */
export class FsKeyValueStore implements KeyValueStore {
  private readonly data = new Map<string, Map<string, string>>();
  private journal!: Journal<KvRecord>;
  private count = 0;

  static async open(opts: FsKeyValueStoreOptions): Promise<FsKeyValueStore> {
    const store = new FsKeyValueStore();
    store.journal = await Journal.open<KvRecord>({
      dir: opts.dir,
      name: "kv",
      logger: opts.logger,
      warnings: opts.warnings,
      compactEveryAppends: opts.compactEveryAppends,
      decode: decodeRecord,
      replay: (r) => store.apply(r.op === "set" ? { ...r, text: JSON.stringify(r.value) } : r),
      snapshot: () => {
        const out: KvRecord[] = [];
        for (const [ns, m] of store.data) {
          for (const [key, text] of m) out.push({ op: "set", ns, key, value: JSON.parse(text) as unknown });
        }
        return out;
      },
      size: () => store.count,
    });
    return store;
  }

  async get<T>(namespace: string, key: string): Promise<T | null> {
    const text = this.data.get(namespace)?.get(key);
    return text === undefined ? null : (JSON.parse(text) as T);
  }

  async set<T>(namespace: string, key: string, value: T): Promise<void> {
    checkNames(namespace, key);
    let text: string | undefined;
    try {
      text = JSON.stringify(value);
    } catch (err) {
      throw new InvalidParamsError(`value: not JSON-serialisable (${(err as Error).message})`);
    }
    if (text === undefined) throw new InvalidParamsError("value: must be JSON-serialisable (got undefined)");
    const value2 = JSON.parse(text) as unknown;
    await this.journal.append({ op: "set", ns: namespace, key, value: value2 }, () =>
      this.apply({ op: "set", ns: namespace, key, text: text as string }),
    );
  }

  async delete(namespace: string, key: string): Promise<void> {
    checkNames(namespace, key);
    // always journaled: a set still in flight for this key must not outlive the delete
    await this.journal.append({ op: "del", ns: namespace, key }, () =>
      this.apply({ op: "del", ns: namespace, key }),
    );
  }

  async list<T>(namespace: string): Promise<Array<{ key: string; value: T }>> {
    const m = this.data.get(namespace);
    if (!m) return [];
    return [...m].map(([key, text]) => ({ key, value: JSON.parse(text) as T }));
  }

  compact(): Promise<void> {
    return this.journal.compact();
  }

  close(): Promise<void> {
    return this.journal.close();
  }

  private apply(
    r: { op: "set"; ns: string; key: string; text: string } | { op: "del"; ns: string; key: string },
  ): void {
    let m = this.data.get(r.ns);
    if (r.op === "set") {
      if (!m) {
        m = new Map();
        this.data.set(r.ns, m);
      }
      if (!m.has(r.key)) this.count++;
      m.set(r.key, r.text);
    } else if (m?.delete(r.key)) {
      this.count--;
      if (m.size === 0) this.data.delete(r.ns);
    }
  }
}

function checkNames(namespace: string, key: string): void {
  if (typeof namespace !== "string" || namespace.length === 0) {
    throw new InvalidParamsError("namespace: must be a non-empty string");
  }
  if (typeof key !== "string" || key.length === 0)
    throw new InvalidParamsError("key: must be a non-empty string");
}

function decodeRecord(v: unknown): KvRecord | null {
  if (typeof v !== "object" || v === null) return null;
  const r = v as Record<string, unknown>;
  if (typeof r.ns !== "string" || typeof r.key !== "string") return null;
  if (r.op === "del") return { op: "del", ns: r.ns, key: r.key };
  if (r.op === "set" && "value" in r && r.value !== undefined)
    return { op: "set", ns: r.ns, key: r.key, value: r.value };
  return null;
}
