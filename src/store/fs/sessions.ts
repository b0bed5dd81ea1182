import { InvalidParamsError } from "../../errors.js";
import { Journal } from "../../journal/index.js";
import type { Logger } from "../../log.js";
import { assertRecord, mergePatch, SESSION_IDENTITY, sessionProblem } from "../records.js";
import { KeyedSerial } from "../serial.js";
import type { ListSessionsQuery, SessionEntry, SessionKind, SessionPatch, SessionStore } from "../types.js";
import type { WarningSink } from "../warnings.js";
import { SessionIndex } from "./session-index.js";

/**
 * One line of `sessions/index.jsonl` (and of its snapshot): a whole entry as stored, or
 * `{"del": key}`. Replay is last-writer-wins. Bare entries keep the 100k-entry snapshot small
 * and quick to parse at start-up.
 */
type SessionRecord = SessionEntry | { del: string };

export interface FsSessionStoreOptions {
  dir: string;
  logger: Logger;
  warnings: WarningSink;
  compactEveryAppends: number;
  classifyKind: (key: string) => SessionKind;
  now: () => number;
}

/**
 * Session entries: in memory (SessionIndex) and journaled to `sessions/index.jsonl`. Every
 * write is serialised per key, reaches the file, and only then becomes visible to readers.
 * Readers get copies; stored entries are immutable.
 */
export class FsSessionStore implements SessionStore {
  private readonly serial = new KeyedSerial();

  private constructor(
    private readonly index: SessionIndex,
    private readonly journal: Journal<SessionRecord>,
    private readonly now: () => number,
  ) {}

  static async open(opts: FsSessionStoreOptions): Promise<FsSessionStore> {
    const index = new SessionIndex(opts.classifyKind);
    const journal = await Journal.open<SessionRecord>({
      dir: opts.dir,
      name: "index",
      logger: opts.logger,
      warnings: opts.warnings,
      compactEveryAppends: opts.compactEveryAppends,
      decode: decodeRecord,
      replay: (r) => {
        if ("key" in r) index.set(r);
        else index.remove(r.del);
      },
      snapshot: () => index.entries(),
      size: () => index.size,
    });
    index.build();
    return new FsSessionStore(index, journal, opts.now);
  }

  /** Path of the live index log (for doctor and tests). */
  get indexPath(): string {
    return this.journal.livePath;
  }

  async get(key: string): Promise<SessionEntry | null> {
    const e = this.index.get(key);
    return e ? cloneEntry(e) : null;
  }

  async put(entry: SessionEntry): Promise<void> {
    const stored = normalizeEntry(entry, "entry");
    return this.serial.run(stored.entry.key, () => this.write(stored));
  }

  update(
    key: string,
    fn: (current: SessionEntry | null) => SessionEntry | null,
  ): Promise<SessionEntry | null> {
    return this.serial.run(key, async () => {
      const cur = this.index.get(key);
      const next = fn(cur ? cloneEntry(cur) : null);
      if (next === null) return cur ? cloneEntry(cur) : null;
      const stored = normalizeEntry(next, "update result");
      if (stored.entry.key !== key) {
        throw new InvalidParamsError(`update result.key: must stay "${key}" (got "${stored.entry.key}")`, {
          field: "key",
        });
      }
      await this.write(stored);
      return cloneEntry(stored.entry);
    });
  }

  patch(key: string, patch: SessionPatch): Promise<SessionEntry | null> {
    return this.serial.run(key, async () => {
      const cur = this.index.get(key);
      if (!cur) return null;
      const merged = mergePatch(cur, patch, SESSION_IDENTITY);
      assertRecord(sessionProblem(merged), "patch");
      const stored: NormalizedEntry = {
        entry: merged as unknown as SessionEntry,
        json: JSON.stringify(merged),
      };
      await this.write(stored);
      return cloneEntry(stored.entry);
    });
  }

  delete(key: string): Promise<boolean> {
    return this.serial.run(key, async () => {
      if (!this.index.get(key)) return false;
      await this.journal.append({ del: key }, () => this.index.remove(key));
      return true;
    });
  }

  async getBySessionId(sessionId: string): Promise<SessionEntry | null> {
    const e = this.index.getBySessionId(sessionId);
    return e ? cloneEntry(e) : null;
  }

  async list(query: ListSessionsQuery): Promise<SessionEntry[]> {
    return this.index.list(query, this.now()).map(cloneEntry);
  }

  async findByLabel(label: string, agentId?: string): Promise<SessionEntry[]> {
    return this.index.findByLabel(label, agentId).map(cloneEntry);
  }

  async count(): Promise<number> {
    return this.index.size;
  }

  /** Writes a snapshot of the index now (normally done in the background). */
  compact(): Promise<void> {
    return this.journal.compact();
  }

  async close(): Promise<void> {
    await this.serial.drain();
    await this.journal.close();
  }

  private write({ entry, json }: NormalizedEntry): Promise<void> {
    return this.journal.appendJson(json, () => this.index.set(entry));
  }
}

interface NormalizedEntry {
  entry: SessionEntry;
  /** Its JSON text: the journal line. */
  json: string;
}

/** A private, JSON-clean copy (undefined fields dropped, as a reload would), after checking the basics. */
function normalizeEntry(entry: SessionEntry, what: string): NormalizedEntry {
  assertRecord(sessionProblem(entry), what);
  const json = JSON.stringify(entry);
  return { entry: JSON.parse(json) as SessionEntry, json };
}

function decodeRecord(v: unknown): SessionRecord | null {
  if (typeof v !== "object" || v === null) return null;
  const r = v as Record<string, unknown>;
  if (typeof r.del === "string" && r.key === undefined) return { del: r.del };
  return sessionProblem(r) === null ? (r as unknown as SessionEntry) : null;
}

/** Copies down to the nested objects SessionEntry declares (their members are primitives). */
function cloneEntry(e: SessionEntry): SessionEntry {
  const c = { ...e };
  if (e.deliveryContext) c.deliveryContext = { ...e.deliveryContext };
  if (e.subagent) c.subagent = { ...e.subagent };
  if (e.threadBinding) c.threadBinding = { ...e.threadBinding };
  return c;
}
