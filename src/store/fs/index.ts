/**
 * The embedded store driver: everything durable under one state dir, no server needed.
 * Layout and file formats: `paths.ts` (layout) and `journal.ts` (journals); design notes
 * and the durability choice: README.md beside this file.
 */
import path from "node:path";
import { z } from "zod";
import { DEFAULT_TAIL_CACHE_CHARS } from "../../config/schema.js";
import { formatIssues, SwitchboardError } from "../../errors.js";
import type { Logger } from "../../log.js";
import { defaultClassifyKind } from "../kind.js";
import type { SessionKind, StoreDriver } from "../types.js";
import { WarningSink } from "../warnings.js";
import { FsKeyValueStore } from "./kv.js";
import { StateDirLock } from "./lock.js";
import { FsOutboxStore } from "./outbox.js";
import { ensureStateDir, layout } from "./paths.js";
import { FsRunStore } from "./runs.js";
import { FsSessionStore } from "./sessions.js";
import { FsTranscriptStore } from "./transcripts.js";

export { defaultClassifyKind } from "../kind.js";
export { FsKeyValueStore } from "./kv.js";
export { FsOutboxStore } from "./outbox.js";
export { FsRunStore } from "./runs.js";
export { FsSessionStore } from "./sessions.js";
export { FsTranscriptStore } from "./transcripts.js";

export const fsStoreOptionsSchema = z.object({
  /** Root of everything the driver writes; created 0700 (an existing looser dir is tightened). */
  stateDir: z.string().min(1),
  /** A journal compacts after this many appended records, and at least a quarter of its live records. */
  compactEveryAppends: z.number().int().positive().default(10_000),
  /**
   * Finished runs kept (in memory, in snapshots, across restarts); older ones are forgotten.
   * Runs carry their reply text, so this bounds memory: 10,000 runs of ~1 KB are ~10 MB (with
   * short replies ~300 B each plus the tables' room, ~5 MB).
   */
  maxFinishedRuns: z.number().int().positive().default(10_000),
  /**
   * Transcript files kept open for appending (least recently used are closed). Node raises the
   * soft open-files limit to the hard one at start-up; keep this well below `ulimit -Hn`.
   */
  maxOpenTranscripts: z.number().int().positive().default(1024),
  /**
   * Characters of transcript JSON kept in memory as the newest messages of recently used
   * transcripts (window and history reads skip the disk); 0 turns the cache off. 12M chars is
   * about 12 MB of heap: ~1,500 sessions × 30 messages.
   */
  tailCacheChars: z.number().int().min(0).default(DEFAULT_TAIL_CACHE_CHARS),
});

export interface FsStoreOptions extends z.input<typeof fsStoreOptionsSchema> {
  logger: Logger;
  /** Session kind of a key, for `list({ kinds })`; default: the SEMANTICS §1 rule. */
  classifyKind?: (key: string) => SessionKind;
  /** Clock in ms (activeMinutes, outbox expiry, archive names); default Date.now. */
  now?: () => number;
}

export class FsStore implements StoreDriver {
  readonly name = "fs" as const;
  private closing: Promise<void> | null = null;

  constructor(
    readonly stateDir: string,
    readonly sessions: FsSessionStore,
    readonly transcripts: FsTranscriptStore,
    readonly runs: FsRunStore,
    readonly outbox: FsOutboxStore,
    readonly kv: FsKeyValueStore,
    private readonly lock: StateDirLock,
    private readonly sink: WarningSink,
  ) {}

  /** Everything skipped while reading store files (torn lines, invalid records). */
  warnings(): string[] {
    return this.sink.all();
  }

  /** Compacts every journal now (normally they compact in the background). */
  async compact(): Promise<void> {
    await Promise.all([
      this.sessions.compact(),
      this.runs.compact(),
      this.outbox.compact(),
      this.kv.compact(),
    ]);
  }

  /** Waits for queued writes, closes every file, releases the state dir. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.all([
        this.sessions.close(),
        this.transcripts.close(),
        this.runs.close(),
        this.outbox.close(),
        this.kv.close(),
      ]);
      await this.lock.release();
    })();
    return this.closing;
  }
}

/** Opens (creating if needed) the store under `stateDir`; refuses a dir another process uses. */
export async function createFsStore(opts: FsStoreOptions): Promise<FsStore> {
  const parsed = fsStoreOptionsSchema.safeParse({
    stateDir: opts.stateDir,
    compactEveryAppends: opts.compactEveryAppends,
    maxFinishedRuns: opts.maxFinishedRuns,
    maxOpenTranscripts: opts.maxOpenTranscripts,
    tailCacheChars: opts.tailCacheChars,
  });
  if (!parsed.success) throw new SwitchboardError("CONFIG", formatIssues(parsed.error.issues, "fs store: "));
  const o = parsed.data;
  const stateDir = path.resolve(o.stateDir);
  const logger = opts.logger.child({ component: "store.fs" });
  const now = opts.now ?? Date.now;

  await ensureStateDir(stateDir, logger);
  const lock = await StateDirLock.acquire(layout.lock(stateDir), stateDir, logger);
  const opened: Array<{ close(): Promise<void> }> = [];
  try {
    const warnings = new WarningSink(logger);
    const common = { logger, warnings, compactEveryAppends: o.compactEveryAppends };
    const sessions = await FsSessionStore.open({
      ...common,
      dir: layout.sessionsDir(stateDir),
      classifyKind: opts.classifyKind ?? defaultClassifyKind,
      now,
    });
    opened.push(sessions);
    const runs = await FsRunStore.open({
      ...common,
      dir: layout.runsDir(stateDir),
      maxFinishedRuns: o.maxFinishedRuns,
    });
    opened.push(runs);
    const outbox = await FsOutboxStore.open({ ...common, dir: layout.outboxDir(stateDir), now });
    opened.push(outbox);
    const kv = await FsKeyValueStore.open({ ...common, dir: layout.kvDir(stateDir) });
    opened.push(kv);
    const transcripts = new FsTranscriptStore({
      stateDir,
      warnings,
      now,
      maxOpenFiles: o.maxOpenTranscripts,
      tailCache: { maxChars: o.tailCacheChars },
    });
    // after the other stores opened, so the slices do not stretch the open itself
    sessions.startBackgroundWork();
    return new FsStore(stateDir, sessions, transcripts, runs, outbox, kv, lock, warnings);
  } catch (err) {
    await Promise.allSettled(opened.map((s) => s.close()));
    await lock.release();
    throw err;
  }
}
