/**
 * Storage contracts. Two drivers implement them (`fs/`, `redis/`); only the composition root
 * (`src/app/`) picks one. Both run the same contract suite in `test/contract/store.ts`.
 */

export type ChatType = "direct" | "group" | "channel";
export type SessionKind = "main" | "group" | "cron" | "hook" | "node" | "other";
export type ThinkingLevel = "off" | "minimal" | "low" | "medium" | "high";
export type SendPolicyOverride = "allow" | "deny";

export interface DeliveryContext {
  channel: string;
  to: string;
  accountId?: string;
  threadId?: string;
}

/** A persisted session (API.md §5 row fields plus bookkeeping). */
export interface SessionEntry {
  key: string;
  sessionId: string;
  agentId: string;
  createdAt: number;
  updatedAt: number;
  channel?: string;
  chatType?: ChatType;
  displayName?: string;
  label?: string;
  /** Per-session model override (`provider/model`). */
  model?: string;
  /** Model the last run actually used. */
  lastModel?: string;
  thinkingLevel?: ThinkingLevel;
  verboseLevel?: string;
  systemSent?: boolean;
  abortedLastRun?: boolean;
  sendPolicy?: SendPolicyOverride;
  contextTokens?: number;
  /** inputTokens + outputTokens: the one meaning of "total tokens" (rows, status card, stats line). */
  totalTokens?: number;
  inputTokens?: number;
  outputTokens?: number;
  /** Tokens in the context as of the last model call (input + output of that call). */
  contextUsedTokens?: number;
  costUsd?: number;
  lastChannel?: string;
  lastTo?: string;
  lastAccountId?: string;
  lastThreadId?: string;
  deliveryContext?: DeliveryContext;
  /** Sub-agent lineage. */
  spawnedBy?: string;
  spawnDepth?: number;
  /** Set on sub-agent entries: what the spawn asked for. */
  subagent?: {
    task: string;
    runId: string;
    mode: "run" | "session";
    cleanup: "delete" | "keep";
    runTimeoutSeconds: number;
    sandboxed: boolean;
    endedAt?: number;
    outcome?: RunStatus;
    /** Completion announce that could not be delivered anywhere (recorded, not lost). */
    undeliveredAnnounce?: string;
    /**
     * The run whose completion announce has been handled (sent, suppressed by ANNOUNCE_SKIP or
     * recorded as undelivered): while it differs from `runId`, this child may still report to
     * its requester, which holds its own announce back until then. `""` until the first; absent
     * on entries written before it was tracked (those never hold anything back).
     */
    announcedRunId?: string;
  };
  sandboxed?: boolean;
  /** Bound platform thread (thread-bound sub-agents). */
  threadBinding?: { channel: string; accountId?: string; to: string; threadId: string; boundAt: number };
  archivedAt?: number;
  /** When the current sessionId started (a reset starts a new one); createdAt when never reset. */
  sessionStartedAt?: number;
  /** Last inbound user/channel message (idle resets); system events do not count. */
  lastInteractionAt?: number;
  /** Compactions written to the current transcript. */
  compactionCount?: number;
  /** The sessionId before the last reset. */
  previousSessionId?: string;
}

export type SessionPatch = Partial<Omit<SessionEntry, "key" | "createdAt">>;

export interface ListSessionsQuery {
  agentId?: string;
  kinds?: SessionKind[];
  label?: string;
  /** Only entries updated within this many minutes. */
  activeMinutes?: number;
  spawnedBy?: string;
  /** Case-insensitive substring of key, label or displayName. */
  search?: string;
  limit?: number;
  /** Include archived entries (default false). */
  includeArchived?: boolean;
}

export interface SessionStore {
  /** null when absent. */
  get(key: string): Promise<SessionEntry | null>;
  /** Creates or replaces the entry whole. */
  put(entry: SessionEntry): Promise<void>;
  /**
   * Atomic read-modify-write of one entry (serialised per key). `fn` gets the current entry
   * (or null) and returns the next one, or null to leave it unchanged. Returns the stored result.
   */
  update(
    key: string,
    fn: (current: SessionEntry | null) => SessionEntry | null,
  ): Promise<SessionEntry | null>;
  /** Shallow merge into an existing entry; `undefined` values delete the field. null when absent. */
  patch(key: string, patch: SessionPatch): Promise<SessionEntry | null>;
  /** true when something was deleted. */
  delete(key: string): Promise<boolean>;
  getBySessionId(sessionId: string): Promise<SessionEntry | null>;
  /** Newest-updated first; across all agents when `agentId` is absent. */
  list(query: ListSessionsQuery): Promise<SessionEntry[]>;
  /** Entries whose label equals `label` exactly (optionally one agent). */
  findByLabel(label: string, agentId?: string): Promise<SessionEntry[]>;
  count(): Promise<number>;
  close(): Promise<void>;
}

export type MessageRole = "user" | "assistant" | "toolCall" | "toolResult" | "system" | "compaction";

export interface Provenance {
  /**
   * API.md §6 kinds. `operator` is only read: journals written before chat.send marked its
   * messages `external_user` (gateway/chat-send.ts) may still carry it; nothing writes it now.
   */
  kind: "external_user" | "inter_session" | "subagent_announce" | "system" | "operator" | "cron" | "hook";
  sourceSessionKey?: string;
  sourceRunId?: string;
  sourceChannel?: string;
  sourceTool?: string;
  channel?: string;
  senderId?: string;
  senderName?: string;
}

export interface Usage {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
  cost?: number;
  /** On a transcript line: the model (`provider/model`) that answered (API.md §8.4). */
  model?: string;
}

/** A model of a run's failover chain that did not answer, and why (API.md §8.4 `runs.get.fallbacks`). */
export interface ModelFallback {
  model: string;
  /** The error class (`rate_limited`, `overloaded`, … see src/agent/providers/failure.ts). */
  class: string;
  /** Not called: its circuit was open. */
  skipped?: true;
}

/** One transcript line (API.md §6). `content` is a string, or structured data for tool calls/results. */
export interface TranscriptMessage {
  id: string;
  sessionId: string;
  role: MessageRole;
  content: unknown;
  timestamp: number;
  provenance?: Provenance;
  toolCallId?: string;
  toolName?: string;
  usage?: Usage;
  runId?: string;
  model?: string;
}

export interface TranscriptRef {
  agentId: string;
  sessionId: string;
}

export interface ReadTailOptions {
  /** How many messages (after filtering) to return, newest last. */
  limit: number;
  /** Include toolCall/toolResult messages (default false). */
  includeTools?: boolean;
  /**
   * The caller only reads what it gets (never mutates it): a store with a cache may hand out
   * its own objects instead of copies (the runtime's window read, every model step).
   */
  readOnly?: boolean;
  /**
   * The caller appended to this transcript just before (a turn reading its window after writing
   * its inbound messages or tool results): a store whose cached tail that append's reply brought
   * up to date may answer from it without asking its backend again. The read then sees the
   * transcript as of that append (what other processes append after it, the next read sees).
   */
  afterAppend?: boolean;
}

/**
 * Use of a tail cache: what it holds (`files`, `chars` of JSON, at most `maxChars`), reads it
 * answered (`hits`) or not (`misses`), and `fills`: tails loaded from the store into it (a read
 * it could not answer, or an append to a transcript it did not hold). Fills per turn near zero
 * mean the busy sessions' tails fit; a fill per turn means every turn reads its window from disk.
 */
export interface TailCacheStats {
  files: number;
  chars: number;
  maxChars: number;
  hits: number;
  misses: number;
  fills: number;
}

export interface TranscriptStore {
  /**
   * Appends in call order per transcript; durable when the promise resolves. A message whose
   * `id` is already among the transcript's messages is not appended again (API.md §6): resolves
   * false. fs checks the newest 512 lines (where a re-run turn's ids are); redis checks all.
   */
  append(ref: TranscriptRef, message: TranscriptMessage): Promise<boolean>;
  /** The last `limit` messages, oldest first, read from the end (never the whole transcript). */
  readTail(ref: TranscriptRef, opts: ReadTailOptions): Promise<TranscriptMessage[]>;
  /**
   * The first `limit` messages (oldest first) from a bounded read of the transcript's start:
   * never more than `maxBytes` (default 64 KiB) of it. For titles derived from the first message.
   */
  readHead(ref: TranscriptRef, opts: { limit: number; maxBytes?: number }): Promise<TranscriptMessage[]>;
  count(ref: TranscriptRef): Promise<number>;
  /** Where the transcript lives (a path for fs, a stream key for redis). */
  locate(ref: TranscriptRef): string;
  /** Renames the transcript out of the live set (kept, not destroyed). */
  archive(ref: TranscriptRef, reason: "archived" | "deleted", opts?: { at?: number }): Promise<string | null>;
  /**
   * Where `archive(ref, reason, { at })` puts the transcript (an announce cites it before the
   * rename happens). Same `at`, same place, unless that name was already taken.
   */
  archivedLocation(ref: TranscriptRef, reason: "archived" | "deleted", at: number): string;
  /** Problems found while reading (e.g. a torn last line), for health/doctor. */
  warnings(): string[];
  /** Use of the in-memory tail cache (all zero when it is off), for `health` and tests. */
  cacheStats(): TailCacheStats;
  close(): Promise<void>;
}

/** `waiting`: paused before a tool call until an approver decides (API.md §8.3); not final. */
export type RunStatus = "queued" | "running" | "waiting" | "ok" | "error" | "timeout" | "aborted";
export const FINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set(["ok", "error", "timeout", "aborted"]);

/** Whether the run has finished (ok, error, timeout or aborted). */
export function isFinal(run: RunRecord | null): boolean {
  return run !== null && FINAL_RUN_STATUSES.has(run.status);
}

export interface RunRecord {
  runId: string;
  sessionKey: string;
  agentId: string;
  status: RunStatus;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  reply?: string;
  error?: string;
  usage?: Usage;
  model?: string;
  /** Models that failed before `model` answered (or before the run failed), in order. */
  fallbacks?: ModelFallback[];
  /** What started it: inbound message, operator chat.send, sessions_send, spawn, announce… */
  origin?: string;
  /** Deliver the final reply to the session's chat. */
  deliver?: boolean;
  /** Why the reply could not be delivered, when it could not. */
  deliveryError?: string;
  /** While `waiting`: the approval the run waits for (cleared when it runs again). */
  waitingFor?: { approvalId: string; tool: string; args: unknown };
}

export interface RunStore {
  put(run: RunRecord): Promise<void>;
  get(runId: string): Promise<RunRecord | null>;
  /**
   * Merge; null when absent. `assumed`: the record as its first writer stored it, when the caller
   * can rebuild it exactly (a pipeline worker from the accepted request): a store that must read
   * before a conditional write may try the write against it first (compared by value, so another
   * writer in between is never overwritten).
   */
  patch(runId: string, patch: Partial<RunRecord>, assumed?: RunRecord): Promise<RunRecord | null>;
  /**
   * Optional: `patch` for a change whose loss in a crash is harmless, such as a run marked
   * running (the queue re-runs a turn it has no outcome for, whatever its record says). Applied
   * at once (`get` and `listBySession` see it) and written with the store's next write or within
   * a second; resolves without waiting for the disk. Callers fall back to `patch`.
   */
  patchSoon?(runId: string, patch: Partial<RunRecord>): Promise<RunRecord | null>;
  /** `put`, seen at once and written like `patchSoon`'s change. Callers fall back to `put`. */
  putSoon?(run: RunRecord): Promise<void>;
  listBySession(sessionKey: string, limit: number): Promise<RunRecord[]>;
  close(): Promise<void>;
}

/** What `OutboxStore.lease` found. */
export type OutboxLease =
  /** Yours to send; `expired`: an earlier lease ran out without a mark (that send may have happened). */
  | { acquired: true; expired: boolean }
  /** Already sent (marked done): do not send again. */
  | { acquired: false; state: "done"; messageIds?: string[] }
  /** Someone holds a live lease (or a plain claim): try again in `retryInMs`. */
  | { acquired: false; state: "leased"; retryInMs: number };

/** Idempotency records for outbound side effects (replies, announces) and inbound dedupe. */
export interface OutboxStore {
  /** true if `id` was newly claimed; false if it was already claimed (do not send again). */
  claim(id: string, ttlMs: number): Promise<boolean>;
  /**
   * A short lease while sending (`leaseMs`), remembered `keepMs`: at-least-once delivery. Take it
   * before the send, `complete` (the long-lived mark) once the platform said yes, `release` when
   * the send failed. A lease that expired without a mark can be taken again (`expired: true`).
   */
  lease(id: string, leaseMs: number, keepMs: number): Promise<OutboxLease>;
  /**
   * Record the platform message ids of a completed send. With `ttlMs` the mark lives that long
   * from now; without, it keeps the claim's deadline.
   */
  complete(id: string, result: { messageIds: string[] }, ttlMs?: number): Promise<void>;
  get(id: string): Promise<{ state: "claimed" | "done"; messageIds?: string[] } | null>;
  /** Release a claim after a failed send so a retry may send. */
  release(id: string): Promise<void>;
}

/** A store driver bundles everything durable the gateway keeps. */
export interface StoreDriver {
  name: "fs" | "redis";
  sessions: SessionStore;
  transcripts: TranscriptStore;
  runs: RunStore;
  outbox: OutboxStore;
  /** Small durable key/value records (thread bindings, cursors, …). */
  kv: KeyValueStore;
  close(): Promise<void>;
}

export interface KeyValueStore {
  get<T>(namespace: string, key: string): Promise<T | null>;
  set<T>(namespace: string, key: string, value: T): Promise<void>;
  delete(namespace: string, key: string): Promise<void>;
  list<T>(namespace: string): Promise<Array<{ key: string; value: T }>>;
}
