import type { KeyValueStore, RunRecord, RunStore } from "../../src/store/types.js";

/**
 * In-memory RunStore / KeyValueStore for tests and benches. Values are copied in and out so a
 * caller mutating a returned record cannot change what is stored (as with a real store).
 * Share one instance between two pipeline instances to simulate a restart over durable state.
 */

function copyRun(r: RunRecord): RunRecord {
  return r.usage ? { ...r, usage: { ...r.usage } } : { ...r };
}

export class MemoryRunStore implements RunStore {
  private readonly runs = new Map<string, RunRecord>();
  private readonly bySession = new Map<string, string[]>();
  /** Every write, in order (for tests asserting the lifecycle a run went through). */
  readonly writes: Array<{ runId: string; status: RunRecord["status"] }> = [];
  recordWrites = false;

  async put(run: RunRecord): Promise<void> {
    if (!this.runs.has(run.runId)) {
      const ids = this.bySession.get(run.sessionKey) ?? [];
      ids.push(run.runId);
      this.bySession.set(run.sessionKey, ids);
    }
    this.runs.set(run.runId, copyRun(run));
    if (this.recordWrites) this.writes.push({ runId: run.runId, status: run.status });
  }

  async get(runId: string): Promise<RunRecord | null> {
    const r = this.runs.get(runId);
    return r ? copyRun(r) : null;
  }

  async patch(runId: string, patch: Partial<RunRecord>): Promise<RunRecord | null> {
    const r = this.runs.get(runId);
    if (!r) return null;
    const next = copyRun({ ...r, ...patch, runId });
    this.runs.set(runId, next);
    if (this.recordWrites) this.writes.push({ runId, status: next.status });
    return copyRun(next);
  }

  async listBySession(sessionKey: string, limit: number): Promise<RunRecord[]> {
    const ids = this.bySession.get(sessionKey) ?? [];
    const out: RunRecord[] = [];
    for (let i = ids.length - 1; i >= 0 && out.length < limit; i--) {
      const r = this.runs.get(ids[i]!);
      if (r) out.push(copyRun(r));
    }
    return out;
  }

  async close(): Promise<void> {}

  size(): number {
    return this.runs.size;
  }
}

export class MemoryKeyValueStore implements KeyValueStore {
  private readonly data = new Map<string, Map<string, string>>();

  async get<T>(namespace: string, key: string): Promise<T | null> {
    const raw = this.data.get(namespace)?.get(key);
    return raw === undefined ? null : (JSON.parse(raw) as T);
  }

  async set<T>(namespace: string, key: string, value: T): Promise<void> {
    let ns = this.data.get(namespace);
    if (!ns) {
      ns = new Map();
      this.data.set(namespace, ns);
    }
    ns.set(key, JSON.stringify(value));
  }

  async delete(namespace: string, key: string): Promise<void> {
    this.data.get(namespace)?.delete(key);
  }

  async list<T>(namespace: string): Promise<Array<{ key: string; value: T }>> {
    const ns = this.data.get(namespace);
    if (!ns) return [];
    return [...ns].map(([key, raw]) => ({ key, value: JSON.parse(raw) as T }));
  }
}
