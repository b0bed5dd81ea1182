import type { CompactionConfig } from "../config/context.js";
import { errorMessage } from "../errors.js";
import type { Services } from "../services/index.js";
import type { ModelProvider } from "../services/models.js";
import type { SessionEntry, TranscriptMessage, TranscriptRef } from "../store/types.js";
import { usageContext } from "../usage/context.js";
import {
  type CompactionContent,
  type SessionContext,
  splitForCompaction,
  summarize,
  summaryTokens,
} from "./compaction.js";
import { estimateTokens, toUnits } from "./prompt.js";
import { budgetedCall } from "./usage-context.js";

/**
 * Runs one compaction of a session: split the uncovered messages, summarise the older part with
 * the compaction model (or the session's), append the `compaction` line (idempotent id per run),
 * count it on the entry. Failures are values (and a log line), never a broken session.
 */

export type CompactOutcome =
  | { ok: true; entry: SessionEntry; content: CompactionContent; summarized: number }
  | { ok: false; reason: string; nothingToCompact?: boolean };

export async function compactSession(
  services: Services,
  o: {
    entry: SessionEntry;
    ref: TranscriptRef;
    context: SessionContext;
    /** The session's model ref; the summary uses `config.model` when set. */
    sessionModel: string;
    config: CompactionConfig;
    runId: string;
    /** Estimated prompt tokens before (for the entry's tokensBefore). */
    estimate: number;
    system: string;
    specsTokens: number;
    instructions?: string;
    signal?: AbortSignal;
  },
): Promise<CompactOutcome> {
  const log = services.logger.child({ sessionKey: o.entry.key, runId: o.runId });
  const split =
    splitForCompaction(o.context.messages, o.config.keepLastTurns) ??
    splitForCompaction(o.context.messages, 1);
  if (!split || split.older.length === 0) {
    return { ok: false, reason: "nothing to compact yet", nothingToCompact: true };
  }
  const modelRef = o.config.model ?? o.sessionModel;
  const previous = o.context.compaction;
  let summary: string;
  try {
    const resolved = services.models.resolve(modelRef);
    // Through the failover chain like a turn (API.md §8.4): the summary model, then the fallbacks.
    const chain = services.models.chainFor(o.entry.agentId, o.entry, modelRef);
    const viaChain: ModelProvider = {
      id: resolved.provider.id,
      kind: resolved.provider.kind,
      // A model call like a turn's (API.md §8.4): its expected cost reserved first (a spent budget
      // leaves the session uncompacted), the real cost settled after and counted in the usage
      // totals under the session's agent and channel and the model that answered (not as a run:
      // an automatic compaction is part of its turn's).
      complete: async ({ model: _primary, ...req }) => {
        const call = {
          runId: `${o.runId}:compaction`,
          index: 0,
          chain,
          promptTokens: req.messages.reduce(
            (n, m) => n + estimateTokens(m.content),
            estimateTokens(req.system ?? ""),
          ),
        };
        const { chained, priced } = await budgetedCall(services, o.entry, call, () =>
          services.models.complete(chain, req),
        );
        services.usage?.record({ ...usageContext(o.entry), model: chained.ref }, priced, { run: false });
        return chained.result;
      },
    };
    summary = await summarize(viaChain, resolved.model, {
      ...(previous ? { previous: previous.summary } : {}),
      older: split.older,
      ...(o.instructions ? { instructions: o.instructions } : {}),
      windowTokens: services.models.contextTokens(modelRef),
      ...(o.signal ? { signal: o.signal } : {}),
    });
  } catch (err) {
    log.warn(
      { err: errorMessage(err), model: modelRef, messages: split.older.length },
      "compaction failed; the session continues with its window",
    );
    return { ok: false, reason: `compaction failed: ${errorMessage(err)}` };
  }
  const first = split.older[0] as TranscriptMessage;
  const last = split.older.at(-1) as TranscriptMessage;
  const tokensAfter =
    estimateTokens(o.system) +
    summaryTokens(summary) +
    o.specsTokens +
    toUnits(split.kept).reduce((n, u) => n + estimateTokens(u), 0);
  const content: CompactionContent = {
    summary,
    fromId: previous?.fromId ?? first.id,
    toId: last.id,
    tokensBefore: Math.round(o.estimate),
    tokensAfter,
  };
  const line: TranscriptMessage = {
    id: `${o.runId}:compaction`,
    sessionId: o.ref.sessionId,
    role: "compaction",
    content,
    timestamp: services.now(),
    runId: o.runId,
    model: modelRef,
  };
  await services.store.transcripts.append(o.ref, line);
  services.bus.emit("message.appended", { sessionKey: o.entry.key, message: line });
  const updated =
    (await services.store.sessions.patch(o.entry.key, {
      compactionCount: (o.entry.compactionCount ?? 0) + 1,
    })) ?? o.entry;
  services.bus.emit("session.updated", { entry: updated });
  log.info(
    { summarized: split.older.length, tokensBefore: content.tokensBefore, tokensAfter, model: modelRef },
    "session compacted",
  );
  return { ok: true, entry: updated, content, summarized: split.older.length };
}
