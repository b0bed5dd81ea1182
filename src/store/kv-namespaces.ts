/**
 * Every namespace of the store's key-value space (`store.kv`), in one place: what a namespace
 * holds, keyed by what, and who writes it. A namespace's name is stored data (fs: the kv journal;
 * redis: the key prefix), so a name never changes once written.
 */

/** A chat thread bound to a sub-agent session (routing/thread-bindings.ts), by `threadBindingKey`. */
export const THREAD_BINDINGS_NS = "threadBindings";

/** Pending DM pairing requests by code, and approved senders (routing/pairing.ts). */
export const PAIRING_REQUESTS_NS = "pairing.requests";
export const PAIRING_APPROVED_NS = "pairing.approved";

/** A reset session's archived row by its old sessionId (sessions/reset.ts). */
export const KV_SESSION_ARCHIVE = "sessionArchive";

/** Sub-agents (src/subagents/; the tools read them). The spawn request per child (text, system, timeout; subagents/apply.ts): `subagents steer` re-submits it. */
export const KV_SPAWN_REQUESTS = "subagents.requests";
/** Runs whose announce must not be sent (replaced by a restart with guidance). */
export const KV_SUPPRESSED = "subagents.suppressed";
/** Sessions that called sessions_yield: the next completion starts a turn for them. */
export const KV_YIELDED = "subagents.yielded";
/** Routing decision of an announce in progress (by child run id). */
export const KV_ANNOUNCES = "subagents.announces";
/** Announces that reached nobody and whose child entry is gone too. */
export const KV_UNDELIVERED = "subagents.undelivered";

/** Cron jobs and their state by job id (cron/service.ts; cli/doctor.ts reads the jobs). */
export const CRON_JOBS_NS = "cron.jobs";
export const CRON_STATE_NS = "cron.state";
/** One job's run log, by zero-padded tick time and run id. */
export const cronRunsNs = (jobId: string): string => `cron.runs:${jobId}`;
/** The local cron driver's next tick and pending retry per job (cron/local.ts). */
export const CRON_NEXT_NS = "cron.next";
export const CRON_RETRY_NS = "cron.retry";

/** Tool-call approvals (approvals/store.ts): by id, standing "always" rules, results, the newest per chat. */
export const APPROVALS_NS = "approvals";
export const ALWAYS_NS = "approvals.always";
export const RESULTS_NS = "approvals.results";
/** The newest pending approval posted into a chat, by chat: the numbered reply (`1`/`2`/`3`) decides it. */
export const BY_CHAT_NS = "approvals.bychat";

/**
 * Usage counts of finished turns (usage/counter.ts, fs store only: on redis they are hashes of
 * their own, `RedisKeys.usage`), by `<period key>|<scope>` (`day:2026-12-06|agent:main`):
 * `{ costUsd, input, output, runs }`. Written in batches every 2 s and on shutdown.
 */
export const USAGE_TOTALS_NS = "usage.totals";
