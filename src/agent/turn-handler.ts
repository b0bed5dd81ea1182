import { deliverOutcome, openTurnChat } from "../delivery/reply.js";
import type { TurnBody } from "../pipeline/handlers.js";
import type { TurnJob, TurnOutcome } from "../pipeline/types.js";
import type { Services } from "../services/index.js";
import { ensureSession } from "../sessions/service.js";
import type { SessionEntry } from "../store/types.js";
import { releaseHolds } from "../usage/context.js";
import { type AgentRuntime, turnRunIds } from "./runtime.js";

/**
 * The agent's turn as the pipeline runs it (pipeline/handlers.ts `createJobHandlers`, which then
 * runs the after-turn hooks of the turn's origin): the session read once, the chat side opened on
 * that row (delivery/reply.ts: typing, the streamed preview), the runtime, what the chat hears
 * when the turn is over (the reply, or the failure line), and then the budget holds its runs were
 * admitted with given back.
 */
export function agentTurn(services: Services, runtime: AgentRuntime): TurnBody {
  /** The session reads prepare started, by job (dropped with a job that never runs). */
  const prepared = new WeakMap<TurnJob, Promise<SessionEntry | null>>();

  /**
   * The turn's one read of its session (started by prepare when the pipeline prepared the turn);
   * a session that is not there yet is created here.
   */
  async function sessionOf(job: TurnJob): Promise<SessionEntry> {
    const early = prepared.get(job);
    prepared.delete(job);
    const read = early ?? services.store.sessions.get(job.sessionKey);
    return (
      (await read.catch(() => null)) ??
      (await ensureSession(services, job.sessionKey, { agentId: job.agentId }))
    );
  }

  return {
    prepare(job) {
      const read = services.store.sessions.get(job.sessionKey);
      read.catch(() => undefined); // a failed read is read again by the turn
      prepared.set(job, read);
    },
    async run(job, ctx) {
      try {
        const entry = await sessionOf(job);
        const chat = await openTurnChat(services, job, entry);
        let outcome: TurnOutcome;
        try {
          outcome = await runtime.runTurn(job, ctx, chat.streaming, entry);
        } catch (err) {
          await chat.stream?.close();
          throw err;
        } finally {
          await chat.stopTyping();
        }
        await deliverOutcome(services, job, chat, outcome, ctx);
        return outcome;
      } finally {
        // The one place a submitted turn's budget holds go back, whatever happened (API.md §8.4):
        // those its first model call took over are no longer held; the others (no call made, a
        // failure before or at it) would refuse other turns until they lapse. After the reply is
        // out, so that it never waits for the ledger (a script round trip on Redis); before the
        // run is final, so that a turn admitted once it is sees no hold of it. Never throws.
        await releaseHolds(services, turnRunIds(job));
      }
    },
  };
}
