import { chmod, rm } from "node:fs/promises";
import path from "node:path";
import { SwitchboardError } from "../../errors.js";
import { DIR_MODE, ensureDir, FILE_MODE, fileSize } from "../../journal/fsutil.js";
import { Journal } from "../../journal/index.js";
import type { Logger } from "../../log.js";
import { WarningSink } from "../../store/warnings.js";
import { JournalModel } from "./journal-model.js";
import { type JournalRecord, journalRecordSchema } from "./schema.js";

/**
 * The local driver's durable queue: the shared journal (src/journal/, the one the fs store uses)
 * named `journal` in `<stateDir>/queue/`, with `fsync`, bound to the in-memory `JournalModel`.
 *
 * Files: `journal.jsonl` (the live log: `{"$log":G}`, then one record per line),
 * `journal.snapshot.jsonl` (the live work at the last compaction) and, while a compaction writes
 * its snapshot, `journal.<g>.jsonl`. A `journal.jsonl` written by older versions (no header, the
 * whole queue history since its last rewrite) replays as is and moves out at the first compaction.
 *
 * - `append` applies the record to the model at once (duplicates and cancels see it at once) and
 *   resolves when the line is written and, with `fsync`, fdatasynced; a rejected append leaves the
 *   record applied and the caller undoes it (acceptTurn/acceptJob, the `final` commit). Appends of
 *   one event-loop phase share one write(2) and one fdatasync (group commit).
 * - `note` is fire-and-forget for records whose loss only means a re-run after a crash: a batch of
 *   notes alone is written but not synced; a failed batch is logged once.
 * - Torn tail, unreadable lines, full disk (STORAGE_UNAVAILABLE, recovery on the same open file)
 *   and compaction (rotation + background snapshot, triggered by appends, so the files stay
 *   proportional to live work) are the shared journal's.
 */

export interface QueueJournalOptions {
  dir: string;
  logger: Logger;
  fsync: boolean;
  /** Compact after this many appended records (and at least a quarter of the live records). */
  compactEveryAppends: number;
  completedCap: number;
}

export interface JournalStats {
  /** Bytes of the queue's files on disk (live log, snapshot, rotated logs not yet deleted). */
  fileBytes: number;
  /** Bytes of the records a snapshot would keep (approximate). */
  liveBytes: number;
  compactions: number;
  /** Batch writes (one syscall each), not records. */
  writes: number;
  /** fdatasync calls: only batches holding an awaited (`append`) record are synced. */
  syncs: number;
}

export const JOURNAL_NAME = "journal";
export const JOURNAL_FILE = `${JOURNAL_NAME}.jsonl`;

export class QueueJournal {
  readonly model: JournalModel;
  private readonly sink: WarningSink;
  private closed = false;

  private constructor(
    private readonly log: Journal<JournalRecord>,
    model: JournalModel,
    sink: WarningSink,
  ) {
    this.model = model;
    this.sink = sink;
  }

  static async open(opts: QueueJournalOptions): Promise<QueueJournal> {
    await ensureDir(opts.dir);
    // files and folders from older versions were 0644/0755: they hold message text
    await chmod(opts.dir, DIR_MODE);
    const live = path.join(opts.dir, JOURNAL_FILE);
    if ((await fileSize(live)) >= 0) await chmod(live, FILE_MODE);
    // an unfinished whole-file rewrite of older versions (the live file was still complete)
    await rm(`${live}.tmp`, { force: true });
    const model = new JournalModel(opts.completedCap);
    // problems met while loading: logged once each, kept for `warnings()`
    const sink = new WarningSink(opts.logger);
    const log = await Journal.open<JournalRecord>({
      dir: opts.dir,
      name: JOURNAL_NAME,
      logger: opts.logger,
      warnings: sink,
      fsync: opts.fsync,
      compactEveryAppends: opts.compactEveryAppends,
      decode: (value) => {
        const rec = journalRecordSchema.safeParse(value);
        return rec.success ? rec.data : null;
      },
      replay: (rec, at) => model.apply(rec, at.length + 1),
      snapshot: () => model.snapshot(),
      size: () => model.records(),
    });
    return new QueueJournal(log, model, sink);
  }

  get warnings(): readonly string[] {
    return this.sink.all();
  }

  /**
   * Applies the record now; resolves once it is written — and, with `fsync`, fdatasynced, so an
   * accepted message survives an OS crash (rejects if the write failed: undo it then).
   */
  append(rec: JournalRecord): Promise<void> {
    if (this.closed) return Promise.reject(closedError());
    const json = JSON.stringify(rec);
    this.model.apply(rec, json.length + 1);
    return this.log.appendJson(json, noop);
  }

  /**
   * Applies the record now and writes it without anyone waiting (see the module comment). With
   * `later`, the record waits for the next batch (a second at most): a turn's `start` and
   * `done`, two of a sequential turn's three writes otherwise, ride with the next turn's append.
   */
  note(rec: JournalRecord, later = false): void {
    if (this.closed) return;
    const json = JSON.stringify(rec);
    this.model.apply(rec, json.length + 1);
    if (later) this.log.noteJsonLater(json);
    else this.log.noteJson(json);
  }

  stats(): JournalStats {
    const s = this.log.stats();
    return {
      fileBytes: s.bytes,
      liveBytes: this.model.liveBytes,
      compactions: s.compactions,
      writes: s.writes,
      syncs: s.syncs,
    };
  }

  /** Compacts now (normally triggered by appends); resolves when the snapshot is on disk. */
  compact(): Promise<void> {
    return this.log.compact();
  }

  /** Writes everything appended so far, then closes the files. Later appends reject. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.log.close();
  }
}

function noop(): void {}

function closedError(): SwitchboardError {
  return new SwitchboardError("UNAVAILABLE", "pipeline journal is closed");
}
