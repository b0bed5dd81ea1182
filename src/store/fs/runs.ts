import { Journal } from "../../journal/index.js";
import type { Logger } from "../../log.js";
import { OrderedSet } from "../../ordered-set.js";
import { assertRecord, mergePatch, RUN_IDENTITY, runProblem } from "../records.js";
import { KeyedSerial } from "../serial.js";
import { FINAL_RUN_STATUSES, type RunRecord, type RunStore } from "../types.js";
import type { WarningSink } from "../warnings.js";

type RunJournalRecord = { op: "put"; run: RunRecord };

export interface FsRunStoreOptions {
  dir: string;
  logger: Logger;
  warnings: WarningSink;
  compactEveryAppends: number;
  /** Finished runs retained (newest by finishing order); older ones are forgotten. */
  maxFinishedRuns: number;
}

/**
 * Runs journaled to `runs/runs.jsonl` and held in memory. Unfinished runs are always kept;
 * of the finished ones only the newest `maxFinishedRuns` (by the order they finished) are
 * retained — in memory, in snapshots and therefore across restarts; older ones are dropped.
 */
export class FsRunStore implements RunStore {
  private readonly runs = new Map<string, RunRecord>();
  /** Per session, sorted by (createdAt, runId) ascending. */
  private readonly bySession = new Map<string, RunRecord[]>();
  /** Finished run ids in the order they finished. */
  private readonly finished = new OrderedSet<string>();
  private readonly serial = new KeyedSerial();
  private journal!: Journal<RunJournalRecord>;

  private constructor(private readonly maxFinishedRuns: number) {}

  static async open(opts: FsRunStoreOptions): Promise<FsRunStore> {
    const store = new FsRunStore(opts.maxFinishedRuns);
    store.journal = await Journal.open<RunJournalRecord>({
      dir: opts.dir,
      name: "runs",
      logger: opts.logger,
      warnings: opts.warnings,
      compactEveryAppends: opts.compactEveryAppends,
      decode: (v) => {
        if (typeof v !== "object" || v === null) return null;
        const r = v as { op?: unknown; run?: unknown };
        return r.op === "put" && runProblem(r.run) === null ? { op: "put", run: r.run as RunRecord } : null;
      },
      replay: (r) => store.set(r.run),
      snapshot: () => store.snapshotRecords(),
      size: () => store.runs.size,
    });
    return store;
  }

  async put(run: RunRecord): Promise<void> {
    const stored = normalizeRun(run, "run");
    return this.serial.run(stored.run.runId, () => this.write(stored));
  }

  /** `put`, written like `patchSoon`: an accepted turn's "queued" record costs no write(2) of its own. */
  async putSoon(run: RunRecord): Promise<void> {
    const stored = normalizeRun(run, "run");
    return this.serial.run(stored.run.runId, async () => this.writeSoon(stored));
  }

  async get(runId: string): Promise<RunRecord | null> {
    const r = this.runs.get(runId);
    return r ? cloneRun(r) : null;
  }

  patch(runId: string, patch: Partial<RunRecord>): Promise<RunRecord | null> {
    return this.change(runId, patch, (stored) => this.write(stored));
  }

  /**
   * The record changes in memory now and its line waits for the runs log's next batch (a turn's
   * final record, a second at most): a turn's "running" costs no write(2) of its own.
   */
  patchSoon(runId: string, patch: Partial<RunRecord>): Promise<RunRecord | null> {
    return this.change(runId, patch, (stored) => this.writeSoon(stored));
  }

  /** Newest-created first. */
  async listBySession(sessionKey: string, limit: number): Promise<RunRecord[]> {
    const arr = this.bySession.get(sessionKey) ?? [];
    const out: RunRecord[] = [];
    for (let i = arr.length - 1; i >= 0 && out.length < limit; i--) out.push(cloneRun(arr[i]!));
    return out;
  }

  compact(): Promise<void> {
    return this.journal.compact();
  }

  async close(): Promise<void> {
    await this.serial.drain();
    await this.journal.close();
  }

  /** `patch` and `patchSoon`: merge in the run's turn of the serial queue, then `write` it. */
  private change(
    runId: string,
    patch: Partial<RunRecord>,
    write: (stored: NormalizedRun) => Promise<void> | void,
  ): Promise<RunRecord | null> {
    return this.serial.run(runId, async () => {
      const cur = this.runs.get(runId);
      if (!cur) return null;
      const merged = mergePatch(cur, patch, RUN_IDENTITY);
      assertRecord(runProblem(merged), "patch");
      const stored: NormalizedRun = { run: merged as unknown as RunRecord, json: JSON.stringify(merged) };
      await write(stored);
      return cloneRun(stored.run);
    });
  }

  private write({ run, json }: NormalizedRun): Promise<void> {
    return this.journal.appendJson(lineOf(json), () => this.set(run));
  }

  /** In memory now; the line rides with the runs log's next batch (or is written within a second). */
  private writeSoon({ run, json }: NormalizedRun): void {
    this.set(run);
    this.journal.noteJsonLater(lineOf(json));
  }

  private set(run: RunRecord): void {
    const old = this.runs.get(run.runId);
    this.runs.set(run.runId, run);
    if (!old) this.linkSession(run);
    else if (!this.replaceInSession(old, run)) {
      this.unlinkSession(old);
      this.linkSession(run);
    }

    this.finished.delete(run.runId);
    if (FINAL_RUN_STATUSES.has(run.status)) {
      this.finished.add(run.runId);
      while (this.finished.size > this.maxFinishedRuns) {
        const oldest = this.finished.shift() as string;
        const victim = this.runs.get(oldest);
        if (victim) {
          this.runs.delete(oldest);
          this.unlinkSession(victim);
        }
      }
    }
  }

  private linkSession(run: RunRecord): void {
    let arr = this.bySession.get(run.sessionKey);
    if (!arr) {
      arr = [];
      this.bySession.set(run.sessionKey, arr);
    } else if (arr.length > 0) {
      // One copy of the key per session, not one per retained run (each arrived in its own request).
      run.sessionKey = arr[0]!.sessionKey;
    }
    const last = arr[arr.length - 1];
    if (last === undefined || compareRuns(last, run) < 0) arr.push(run);
    else arr.splice(lowerBound(arr, run), 0, run);
  }

  /** An update that keeps the run's session and place (every status change does): swapped in place. */
  private replaceInSession(old: RunRecord, run: RunRecord): boolean {
    if (old.sessionKey !== run.sessionKey || old.createdAt !== run.createdAt) return false;
    const arr = this.bySession.get(old.sessionKey);
    if (!arr) return false;
    const i = arr[arr.length - 1] === old ? arr.length - 1 : lowerBound(arr, old);
    if (arr[i] !== old) return false;
    run.sessionKey = old.sessionKey;
    arr[i] = run;
    return true;
  }

  private unlinkSession(run: RunRecord): void {
    const arr = this.bySession.get(run.sessionKey);
    if (!arr) return;
    const i = lowerBound(arr, run);
    if (arr[i] === run) arr.splice(i, 1);
    if (arr.length === 0) this.bySession.delete(run.sessionKey);
  }

  /** Unfinished runs first, then finished ones in finishing order, so a reload evicts the same ones. */
  private snapshotRecords(): RunJournalRecord[] {
    const out: RunJournalRecord[] = [];
    for (const r of this.runs.values()) if (!this.finished.has(r.runId)) out.push({ op: "put", run: r });
    for (const id of this.finished) {
      const r = this.runs.get(id);
      if (r) out.push({ op: "put", run: r });
    }
    return out;
  }
}

/** A run's journal line: exactly JSON.stringify({ op: "put", run }), from the run's JSON. */
function lineOf(runJson: string): string {
  return `{"op":"put","run":${runJson}}`;
}

function compareRuns(a: RunRecord, b: RunRecord): number {
  return a.createdAt - b.createdAt || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0);
}

function lowerBound(arr: RunRecord[], r: RunRecord): number {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareRuns(arr[mid]!, r) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

interface NormalizedRun {
  /** A private, JSON-clean copy. */
  run: RunRecord;
  /** Its JSON text (what the journal stores). */
  json: string;
}

function normalizeRun(run: RunRecord, what: string): NormalizedRun {
  assertRecord(runProblem(run), what);
  const json = JSON.stringify(run);
  return { run: JSON.parse(json) as RunRecord, json };
}

function cloneRun(r: RunRecord): RunRecord {
  const c = { ...r };
  if (r.usage) c.usage = { ...r.usage };
  return c;
}
