import { guardToolCall } from "../approvals/gate.js";
import type { MediaPart } from "../channels/types.js";
import type { CompactionConfig, ContextPruningConfig } from "../config/context.js";
import { errorMessage, SwitchboardError } from "../errors.js";
import { DEFAULT_MAX_JSON_DEPTH, parseGuardedJson } from "../json-limits.js";
import { partsFromMeta, userContent } from "../media/parts.js";
import { MediaUnderstanding } from "../media/understand.js";
import { turnMetaOf } from "../pipeline/turn-meta.js";
import type { JobContext, TurnJob, TurnOutcome } from "../pipeline/types.js";
import type { Services, TurnStreaming } from "../services/index.js";
import type { ModelImage, ModelMessage, ToolSpec } from "../services/models.js";
import type { ToolCaller } from "../sessions/caller.js";
import { deriveChannel } from "../sessions/keys.js";
import { agentOfKey, callerOf, ensureSession } from "../sessions/service.js";
import type {
  ModelFallback,
  Provenance,
  SessionEntry,
  TranscriptMessage,
  TranscriptRef,
  Usage,
} from "../store/types.js";
import { countCost, traced, turnSpan } from "../telemetry/index.js";
import { usageContext } from "../usage/context.js";
import { compactSession } from "./compact-run.js";
import { compactionFor, loadSessionContext } from "./compaction.js";
import { credentialNotice } from "./credential-notice.js";
import { buildSystemPrompt, toolSpecsTokens } from "./prompt.js";
import { pruningDue, pruningFor } from "./pruning.js";
import type { ToolRegistry } from "./tool-registry.js";
import { budgetedCall } from "./usage-context.js";
import { lastModelCallAt, type PromptPlan, planPrompt, type UsageAnchor } from "./window.js";

/**
 * One turn: prompt from the transcript window → model → tool calls (validated) → loop until a
 * final answer or `maxToolSteps`. Every message is appended to the transcript as it happens.
 * Delivery and follow-ups (a2a, announces) are not here: see `turn-handler.ts`, `delivery/reply.ts`
 * and `pipeline/handlers.ts`.
 */

type ResolvedModel = ReturnType<Services["models"]["resolve"]>;

/** What one turn fixes before its first model call. */
interface Turn {
  job: TurnJob;
  ctx: JobContext;
  streaming: TurnStreaming;
  ref: TranscriptRef;
  modelRef: string;
  resolved: ResolvedModel;
  /** The failover chain: `modelRef` first (API.md §8.4). */
  chain: string[];
  caller: ToolCaller;
  specs: readonly ToolSpec[];
  system: string;
  windowTokens: number;
  /** Room compaction leaves for the answer. */
  reserve: number;
  specsTokens: number;
  pruneCfg: ContextPruningConfig;
  compCfg: CompactionConfig;
  maxSteps: number;
  /** `<channel>:<senderId>` of the person whose message started the turn (approvals: "requester"). */
  requester?: string;
  /** The turn's `switchboard.turn` span (traceparent): parent of its model and tool spans. */
  span: string | undefined;
}

/** What changes from step to step of one turn. */
interface TurnState {
  /** Replaced by a compaction. */
  entry: SessionEntry;
  pruning: boolean;
  compactionTried: boolean;
  anchor: UsageAnchor | undefined;
  /** The last prompt's size (reported, else estimated). */
  lastPrompt: number;
  usage: Usage;
  lastContext: number;
  reply: string;
  yielded: boolean;
  /** The model that answered the last call (a fallback when the first failed). */
  answeredBy?: string;
  /** Every model of the chain that failed during this turn, in order. */
  fallbacks: ModelFallback[];
  /** Model calls made (each reserved against the budgets first: API.md §8.4). */
  calls: number;
  /**
   * The final answer's append, still in flight: the session's patch goes out beside it (one
   * round trip for both on redis) and the turn ends when both have.
   */
  finalAppend?: Promise<unknown>;
}

function addUsage(a: Usage, b: Usage): Usage {
  const out: Usage = { input: a.input + b.input, output: a.output + b.output };
  const cr = (a.cacheRead ?? 0) + (b.cacheRead ?? 0);
  const cw = (a.cacheWrite ?? 0) + (b.cacheWrite ?? 0);
  const cost = (a.cost ?? 0) + (b.cost ?? 0);
  if (cr) out.cacheRead = cr;
  if (cw) out.cacheWrite = cw;
  if (cost) out.cost = cost;
  return out;
}

/**
 * A prompt message with its pictures' contents (their size and a read: no bytes are kept), by the
 * message the window handed out (stable objects), and how many of its pictures it was built with.
 */
const withImagesMemo = new WeakMap<
  ModelMessage,
  { vision: boolean; keep: number; decisions: readonly unknown[]; message: ModelMessage }
>();

/**
 * How many of each message's pictures go to the model as pictures (config
 * `media.understanding.image.historyLimit`, docs/media.md): the newest user line's all of them,
 * then, counting back, up to `historyLimit` more in all (the latest of a line first). Without it every earlier picture was sent again on every call: eight photos in a
 * session made an 11.4 MB request.
 */
function picturesKept(messages: readonly ModelMessage[], historyLimit: number): number[] {
  const keep = messages.map(() => 0);
  let budget = historyLimit;
  let newest = true;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== "user") continue;
    const n = m.images?.length ?? 0;
    keep[i] = newest ? n : Math.min(n, budget);
    if (!newest) budget -= keep[i]!;
    newest = false;
  }
  return keep;
}

/** The line a picture that is not sent again leaves in its message. */
function notSentAgain(img: ModelImage, historyLimit: number): string {
  return `[image${img.name ? ` ${img.name}` : ""} (${img.mediaId}) not shown again: only the ${historyLimit} most recent earlier images are sent]`;
}

export class AgentRuntime {
  readonly #media: MediaUnderstanding | null;

  constructor(
    private readonly services: Services,
    private readonly tools: ToolRegistry,
  ) {
    this.#media = services.media
      ? new MediaUnderstanding({
          store: services.media,
          media: services.config.media,
          providers: services.config.models.providers,
          logger: services.logger,
        })
      : null;
  }

  /**
   * Appends one message and announces it on the bus. The id is deterministic (see `stepId`), so
   * a turn re-run after a crash appends nothing it had already appended (the store skips a
   * known id, and nothing is announced twice).
   */
  async append(
    ref: TranscriptRef,
    sessionKey: string,
    msg: Omit<TranscriptMessage, "sessionId" | "timestamp">,
  ): Promise<TranscriptMessage> {
    const full: TranscriptMessage = { ...msg, sessionId: ref.sessionId, timestamp: this.services.now() };
    if (await this.services.store.transcripts.append(ref, full)) {
      this.services.bus.emit("message.appended", { sessionKey, message: full });
    }
    return full;
  }

  /**
   * A message's attachments understood before its line is written (API.md §8.1): transcripts and
   * extracted counts in the parts, failures as `media_note`s; with `echoTranscript` the chat gets
   * each transcript too.
   */
  async #understand(
    job: TurnJob,
    runId: string,
    parts: MediaPart[],
    entry: SessionEntry,
  ): Promise<MediaPart[]> {
    const media = this.#media;
    if (!media || parts.length === 0) return parts;
    const r = await media.enrich(parts);
    if (job.deliver && media.config.understanding.audio.echoTranscript)
      for (const [i, t] of r.transcripts.entries())
        await this.services.delivery
          .deliver(
            {
              sessionKey: job.sessionKey,
              text: `🎤 ${t}`,
              idempotencyKey: `${runId}:transcript:${i}`,
              traceparent: turnSpan(job),
            },
            entry,
          )
          .catch((err: unknown) => this.services.logger.warn({ err }, "media: transcript echo failed"));
    return r.parts;
  }

  /**
   * The prompt's pictures, read right before the call (resized, cached): for a model marked
   * `vision: false` (or with image understanding off) they stay out and the line says so; past
   * `media.understanding.image.historyLimit` an earlier picture is a one-line note with its id.
   * Messages without pictures are handed on as they are (the request JSON cache keys on them).
   */
  async #withImages(messages: readonly ModelMessage[], resolved: ResolvedModel): Promise<ModelMessage[]> {
    const media = this.#media;
    if (!messages.some((m) => m.role === "user" && m.images?.length)) return messages as ModelMessage[];
    const info = this.services.config.models.providers[resolved.provider.id]?.models[resolved.model];
    const vision = info?.vision !== false && media?.config.understanding.image.mode !== "off";
    const historyLimit = media?.config.understanding.image.historyLimit ?? 0;
    const kept = picturesKept(messages, historyLimit);
    const out: ModelMessage[] = [];
    for (const [i, m] of messages.entries()) {
      if (m.role !== "user" || !m.images?.length) {
        out.push(m);
        continue;
      }
      const keep = kept[i] ?? 0;
      const older = m.images.length - keep;
      // Each kept picture's decision, asked every call (a cache hit; made again once its file
      // expired or its resized bytes left the cache): the message is built again when one changed.
      const decisions: Array<Awaited<ReturnType<MediaUnderstanding["image"]>>> = [];
      if (vision && media) for (const img of m.images.slice(older)) decisions.push(await media.image(img));
      const memo = withImagesMemo.get(m);
      if (
        memo &&
        memo.vision === vision &&
        memo.keep === keep &&
        memo.decisions.length === decisions.length &&
        memo.decisions.every((d, j) => d === decisions[j])
      ) {
        out.push(memo.message);
        continue;
      }
      let message: ModelMessage;
      if (!vision || !media) {
        message = {
          role: "user",
          content: `${m.content}\n[${m.images.length === 1 ? "the image is" : "the images are"} not shown: this model does not take images]`,
        };
      } else {
        const images: ModelImage[] = [];
        const notes: string[] = [];
        for (const [j, img] of m.images.entries()) {
          if (j < older) {
            notes.push(notSentAgain(img, historyLimit));
            continue;
          }
          const r = decisions[j - older]!;
          if (r.ok)
            images.push({
              mediaId: img.mediaId,
              mimeType: r.value.mimeType,
              ...(img.name ? { name: img.name } : {}),
              content: r.value,
            });
          else notes.push(`[an image could not be read: ${r.reason}]`);
        }
        message = {
          role: "user",
          content: notes.length ? `${m.content}\n${notes.join("\n")}` : m.content,
          ...(images.length ? { images } : {}),
        };
      }
      withImagesMemo.set(m, { vision, keep, decisions, message });
      out.push(message);
    }
    return out;
  }

  /** `session`: the turn's session entry when the caller has just read it (else it is read here). */
  async runTurn(
    job: TurnJob,
    ctx: JobContext,
    streaming: TurnStreaming = {},
    session?: SessionEntry,
  ): Promise<TurnOutcome> {
    const { services } = this;
    const entry: SessionEntry =
      session ?? (await ensureSession(services, job.sessionKey, { agentId: job.agentId }));
    const ref: TranscriptRef = { agentId: entry.agentId, sessionId: entry.sessionId };
    const meta = turnMetaOf(job);
    if (meta.ok && meta.meta.origin === "command" && meta.meta.command === "compact")
      return this.#compactCommand(job, ctx, entry, meta.meta.instructions);

    // 1. The inbound messages (deterministic ids: a re-run after a crash does not duplicate them).
    for (const m of job.messages) {
      const parts = await this.#understand(job, m.runId, partsFromMeta(m.meta), entry);
      await this.append(ref, entry.key, {
        id: `${m.runId}:in`,
        role: "user",
        content: userContent(m.text, parts),
        runId: job.runId,
        ...(m.provenance ? { provenance: m.provenance } : {}),
      });
    }

    // 2. Model.
    let model: { modelRef: string; resolved: ResolvedModel; chain: string[] };
    try {
      const modelRef = services.models.modelFor(entry.agentId, entry);
      model = {
        modelRef,
        resolved: services.models.resolve(modelRef),
        chain: services.models.chainFor(entry.agentId, entry, modelRef),
      };
    } catch (err) {
      return { status: "error", error: errorMessage(err) };
    }

    // 3. Steps until a final answer, a yield, the step limit or a failure.
    const turn = await this.#setUp(job, ctx, streaming, entry, ref, model);
    const state: TurnState = {
      entry,
      pruning: false,
      compactionTried: false,
      anchor: undefined,
      lastPrompt: 0,
      usage: { input: 0, output: 0 },
      lastContext: 0,
      reply: "",
      yielded: false,
      fallbacks: [],
      calls: 0,
    };
    let outcome: TurnOutcome | null = null;
    try {
      for (let step = 0; ; step++) {
        const next = await this.#step(turn, state, step);
        if (next === "done") break;
        if (next !== "next") {
          outcome = next;
          break;
        }
      }
    } catch (err) {
      outcome = this.#failed(err, ctx, state.entry.key, job.runId);
    }
    return this.#finish(turn, state, outcome);
  }

  /** What a turn fixes before its first model call: caller, tools, system prompt, window sizes. */
  async #setUp(
    job: TurnJob,
    ctx: JobContext,
    streaming: TurnStreaming,
    entry: SessionEntry,
    ref: TranscriptRef,
    model: { modelRef: string; resolved: ResolvedModel; chain: string[] },
  ): Promise<Turn> {
    const { services } = this;
    const cfg = services.config;
    const agentCfg = cfg.agents.list.find((a) => a.id === entry.agentId);
    const caller: ToolCaller = { ...callerOf(services, entry), runId: job.runId };
    // the agent's MCP servers are started on first use (bounded by their timeouts)
    await this.tools.prepare(caller, ctx.signal);
    const specs = this.tools.specs(services, caller);
    const interSource = job.messages.find((m) => m.provenance?.kind === "inter_session")?.provenance
      ?.sourceSessionKey;
    const system = buildSystemPrompt({
      ...(agentCfg?.systemPrompt ? { agentPrompt: agentCfg.systemPrompt } : {}),
      agentId: entry.agentId,
      sessionKey: entry.key,
      channel: deriveChannel(entry.key, entry),
      ...(interSource ? { callerAgentId: agentOfKey(interSource) ?? undefined } : {}),
      extra: job.messages.map((m) => m.extraSystem ?? "").filter(Boolean),
    });
    const windowTokens = services.models.contextTokens(model.modelRef);
    const person = job.messages.find((m) => m.provenance?.kind === "external_user")?.provenance;
    return {
      ...(person?.channel && person.senderId ? { requester: `${person.channel}:${person.senderId}` } : {}),
      job,
      ctx,
      streaming,
      ref,
      span: turnSpan(job),
      ...model,
      caller,
      specs,
      system,
      windowTokens,
      // Compaction leaves room for the answer: the model's output cap (at most half the window).
      reserve: Math.min(services.models.maxOutputTokens?.(model.modelRef) ?? 0, windowTokens / 2),
      specsTokens: toolSpecsTokens(specs),
      pruneCfg: pruningFor(cfg, entry.agentId),
      compCfg: compactionFor(cfg, entry.agentId),
      maxSteps: agentCfg?.maxToolSteps ?? cfg.agents.defaults.maxToolSteps,
    };
  }

  /** One model step: steering, the prompt, the model call, its answer and its tool calls. */
  async #step(turn: Turn, state: TurnState, step: number): Promise<"next" | "done" | TurnOutcome> {
    const { job, ctx, ref } = turn;
    const key = state.entry.key;
    if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error("aborted");
    for (const [i, s] of ctx.takeSteering().entries()) {
      await this.append(ref, key, {
        id: stepId(job.runId, step, `steer${i}`),
        role: "user",
        content: `[Steering from the requester] ${s}`,
        runId: job.runId,
        provenance: { kind: "system", sourceTool: "subagents" } satisfies Provenance,
      });
    }
    const plan = await this.#prompt(turn, state, step);
    if (ctx.signal.aborted) throw ctx.signal.reason ?? new Error("aborted");
    const { res, priced, answeredBy } = await this.#callModel(turn, state, plan);

    if (res.text || res.toolCalls.length === 0) {
      const appended = this.append(ref, key, {
        id: stepId(job.runId, step, "a"),
        role: "assistant",
        content: res.text,
        runId: job.runId,
        usage: { ...priced, model: answeredBy },
        model: answeredBy,
      });
      state.reply = res.text;
      if (res.toolCalls.length === 0) {
        appended.catch(() => undefined); // awaited by #finish
        state.finalAppend = appended;
        return "done";
      }
      await appended;
    }
    if (step >= turn.maxSteps) {
      return {
        status: "error",
        error: `stopped after ${turn.maxSteps} tool steps (agents.defaults.maxToolSteps)`,
      };
    }
    for (const [j, call] of res.toolCalls.entries()) {
      const effectId = stepId(job.runId, step, `c${j}`);
      await this.append(ref, key, {
        id: effectId,
        role: "toolCall",
        content: { arguments: this.tools.argsForTranscript(call.name, call.arguments) },
        toolCallId: call.id,
        toolName: call.name,
        runId: job.runId,
      });
      const result = await traced(
        "switchboard.tool",
        key,
        (span) =>
          this.#execTool(call.name, call.arguments, turn, effectId, span, () => {
            state.yielded = true;
          }),
        { parent: turn.span, attributes: { "switchboard.tool": call.name } },
      );
      await this.append(ref, key, {
        id: stepId(job.runId, step, `r${j}`),
        role: "toolResult",
        content: JSON.stringify(result),
        toolCallId: call.id,
        toolName: call.name,
        runId: job.runId,
      });
    }
    return state.yielded ? "done" : "next";
  }

  /**
   * The prompt of one step from the session's window; compacts first (one automatic attempt per
   * turn) when the window is over the threshold or the budget. A failed compaction is logged and
   * the window is used as it is.
   */
  async #prompt(turn: Turn, state: TurnState, step: number): Promise<PromptPlan> {
    const { services } = this;
    const { job, ref, compCfg, windowTokens } = turn;
    // On a re-run, what this run wrote at this step or later is not context for this step:
    // the model sees what the first attempt saw, so a deterministic model repeats itself
    // and every append is a no-op.
    const load = async () => {
      // every step appended first (the inbound messages, steering, tool results, a compaction)
      const c = await loadSessionContext(services.store.transcripts, ref, state.entry, { afterAppend: true });
      const messages = windowAt(c.messages, job.runId, step);
      return { ...c, messages, afterLine: Math.min(c.afterLine, messages.length) };
    };
    let sctx = await load();
    await this.#warmMedia(sctx.messages);
    // Once a call of this turn pruned, the rest of the turn prunes too (one stable prefix per turn).
    state.pruning ||= pruningDue(turn.pruneCfg, lastModelCallAt(sctx), services.now());
    const planOpts = {
      system: turn.system,
      specsTokens: turn.specsTokens,
      windowTokens,
      budgetRatio: services.config.agents.defaults.contextBudgetRatio,
      pruning: state.pruning ? turn.pruneCfg : null,
    };
    const plan = planPrompt(sctx, { ...planOpts, anchor: state.anchor });
    const over = plan.estimate > Math.min(compCfg.threshold * windowTokens, windowTokens - turn.reserve);
    if (!compCfg.enabled || state.compactionTried || !(over || plan.overBudget || sctx.truncated))
      return plan;
    state.compactionTried = true;
    const done = await compactSession(services, {
      entry: state.entry,
      ref,
      context: sctx,
      sessionModel: turn.modelRef,
      config: compCfg,
      runId: job.runId,
      estimate: plan.estimate,
      system: turn.system,
      specsTokens: turn.specsTokens,
      signal: turn.ctx.signal,
    });
    if (!done.ok) return plan;
    state.entry = done.entry;
    sctx = await load();
    await this.#warmMedia(sctx.messages);
    state.anchor = undefined;
    return planPrompt(sctx, planOpts);
  }

  /** Document texts of the window's user lines, extracted (or found cached) before the prompt is built. */
  async #warmMedia(messages: readonly TranscriptMessage[]): Promise<void> {
    if (!this.#media) return;
    const contents: unknown[] = [];
    for (const m of messages) if (m.role === "user" && Array.isArray(m.content)) contents.push(m.content);
    if (contents.length) await this.#media.warm(contents);
  }

  /** The model call, streamed when asked; records the prompt size, the usage and its price. */
  async #callModel(turn: Turn, state: TurnState, plan: PromptPlan) {
    const { services } = this;
    const { job, streaming } = turn;
    const key = state.entry.key;
    let streamed = false;
    const onTextDelta = (text: string) => {
      if (!text) return;
      streamed = true;
      services.bus.emit("run.delta", { runId: job.runId, sessionKey: key, text });
      streaming.onDelta?.(text);
    };
    // Text a failed model streamed is taken back before the next answers: the chat sees one reply.
    const reset = () => {
      if (!streamed) return;
      streamed = false;
      services.bus.emit("run.delta", { runId: job.runId, sessionKey: key, text: "", reset: true });
      streaming.onReset?.();
    };
    // images as the chain's first model takes them (its `vision` flag)
    const messages = await this.#withImages(plan.messages as ModelMessage[], turn.resolved);
    // The budgets (API.md §8.4): BUDGET_EXCEEDED ends the turn; the first call takes over the hold
    // its turn was admitted with.
    const call = {
      runId: job.runId,
      index: state.calls,
      chain: turn.chain,
      promptTokens: plan.sentEstimate,
      ...(state.calls === 0 ? { takesOver: turnRunIds(job) } : {}),
    };
    state.calls++;
    const { chained, priced } = await budgetedCall(services, state.entry, call, () =>
      traced(
        "switchboard.model",
        key,
        (span) =>
          services.models.complete(
            turn.chain,
            {
              system: plan.system,
              messages,
              tools: turn.specs,
              signal: turn.ctx.signal,
              ...(state.entry.thinkingLevel ? { thinking: state.entry.thinkingLevel } : {}),
              // Streamed when someone will see it: a channel showing the reply as it comes, or a watcher of
              // `run.delta` (a listener, a WebSocket client, the live relay). Otherwise one JSON answer is
              // cheaper than parsing a stream of chunks no one reads.
              ...(streaming.enabled !== false && (streaming.onDelta || services.bus.watched("run.delta", key))
                ? { onTextDelta }
                : {}),
            },
            {
              onReset: reset,
              onFallback: (f, next) => {
                state.fallbacks.push(f);
                if (!f.skipped && (f.class === "auth" || f.class === "billing"))
                  credentialNotice(services, key, f.model, f.class, span);
                services.bus.emit("run.fallback", {
                  runId: job.runId,
                  sessionKey: key,
                  ...f,
                  ...(next !== undefined ? { next } : {}),
                });
              },
            },
          ),
        { parent: turn.span, attributes: { "switchboard.model": turn.modelRef } },
      ),
    );
    const res = chained.result;
    const answeredBy = chained.ref;
    state.answeredBy = answeredBy;
    // The real prompt size as the provider reports it (cached tokens included); else the estimate.
    const reported = res.usage.input + (res.usage.cacheRead ?? 0) + (res.usage.cacheWrite ?? 0);
    state.lastPrompt = reported > 0 ? reported : plan.sentEstimate;
    state.anchor = plan.lastId !== undefined ? { id: plan.lastId, tokens: state.lastPrompt } : undefined;
    if (streamed && res.toolCalls.length > 0) {
      services.bus.emit("run.delta", { runId: job.runId, sessionKey: key, text: "", reset: true });
      streaming.onReset?.();
    }
    countCost(state.entry.agentId, priced.cost);
    state.usage = addUsage(state.usage, priced);
    state.lastContext = res.usage.input + res.usage.output;
    return { res, priced, answeredBy };
  }

  /** A step that threw: aborted or timed out when the run's signal says so, else an error. */
  #failed(err: unknown, ctx: JobContext, sessionKey: string, runId: string): TurnOutcome {
    if (ctx.signal.aborted) {
      const reason = ctx.signal.reason;
      const status =
        (reason instanceof SwitchboardError && reason.code === "TIMEOUT") ||
        (reason instanceof Error && reason.message === "timeout")
          ? "timeout"
          : "aborted";
      return { status, error: status === "timeout" ? "run timed out" : "run aborted" };
    }
    this.services.logger.warn({ err, sessionKey, runId }, "turn failed");
    return { status: "error", error: errorMessage(err) };
  }

  /** The turn's outcome, and the session row updated with its usage and model. */
  async #finish(turn: Turn, state: TurnState, outcome: TurnOutcome | null): Promise<TurnOutcome> {
    const { services } = this;
    const { entry, usage, reply, lastPrompt } = state;
    const aborted = (o: TurnOutcome | null) => o?.status === "aborted" || o?.status === "timeout";
    const patched = services.store.sessions.patch(entry.key, {
      updatedAt: services.now(),
      lastModel: state.answeredBy ?? turn.modelRef,
      // contextTokens: the last prompt's real size (issue 17); totalTokens: input + output (SEMANTICS §5).
      ...(lastPrompt > 0 ? { contextTokens: lastPrompt } : {}),
      contextUsedTokens: state.lastContext,
      totalTokens: (entry.inputTokens ?? 0) + usage.input + (entry.outputTokens ?? 0) + usage.output,
      inputTokens: (entry.inputTokens ?? 0) + usage.input,
      outputTokens: (entry.outputTokens ?? 0) + usage.output,
      costUsd: (entry.costUsd ?? 0) + (usage.cost ?? 0),
      abortedLastRun: aborted(outcome),
      systemSent: true,
    });
    patched.catch(() => undefined); // awaited below, after the append
    let failed: TurnOutcome | null = null;
    try {
      await state.finalAppend;
    } catch (err) {
      failed = this.#failed(err, turn.ctx, entry.key, turn.job.runId);
    }
    const final: TurnOutcome = failed ?? outcome ?? { status: "ok", reply };
    if (final.status === "ok") final.reply = reply;
    final.usage = usage;
    services.usage?.record({ ...usageContext(entry), model: state.answeredBy ?? turn.modelRef }, usage);
    final.model = state.answeredBy ?? turn.modelRef;
    if (state.fallbacks.length > 0) final.fallbacks = state.fallbacks;
    if (state.yielded) final.yielded = true;
    let updated = await patched;
    // the answer's append failed on an aborted turn (the patch went out before that was known)
    if (aborted(failed)) updated = await services.store.sessions.patch(entry.key, { abortedLastRun: true });
    if (updated) services.bus.emit("session.updated", { entry: updated });
    return final;
  }

  /** `/compact [instructions]`: a forced compaction in the session's lane; the reply says what happened. */
  async #compactCommand(
    job: TurnJob,
    ctx: JobContext,
    entry: SessionEntry,
    instructions: string | undefined,
  ): Promise<TurnOutcome> {
    const { services } = this;
    const ref: TranscriptRef = { agentId: entry.agentId, sessionId: entry.sessionId };
    let modelRef: string;
    try {
      modelRef = services.models.modelFor(entry.agentId, entry);
      services.models.resolve(modelRef);
    } catch (err) {
      return { status: "error", error: errorMessage(err) };
    }
    const caller: ToolCaller = { ...callerOf(services, entry), runId: job.runId };
    const specsTokens = toolSpecsTokens(this.tools.specs(services, caller));
    const agentPrompt = services.config.agents.list.find((a) => a.id === entry.agentId)?.systemPrompt;
    const system = buildSystemPrompt({
      ...(agentPrompt ? { agentPrompt } : {}),
      agentId: entry.agentId,
      sessionKey: entry.key,
      channel: deriveChannel(entry.key, entry),
      extra: [],
    });
    const sctx = await loadSessionContext(services.store.transcripts, ref, entry);
    const plan = planPrompt(sctx, {
      system,
      specsTokens,
      windowTokens: services.models.contextTokens(modelRef),
      budgetRatio: services.config.agents.defaults.contextBudgetRatio,
      pruning: null,
    });
    const done = await compactSession(services, {
      entry,
      ref,
      context: sctx,
      sessionModel: modelRef,
      config: compactionFor(services.config, entry.agentId),
      runId: job.runId,
      estimate: plan.estimate,
      system,
      specsTokens,
      ...(instructions ? { instructions } : {}),
      signal: ctx.signal,
    });
    if (!done.ok) {
      if (done.nothingToCompact) return { status: "ok", reply: "Nothing to compact yet." };
      // The chat hears about it (only "ok" replies are delivered); the session is unchanged.
      const why = done.reason.charAt(0).toUpperCase() + done.reason.slice(1);
      return { status: "ok", reply: `${why}; the conversation continues unchanged.` };
    }
    const c = done.content;
    return {
      status: "ok",
      reply: `Compacted ${done.summarized} older messages into a summary (~${c.tokensBefore} → ~${c.tokensAfter} tokens).`,
      model: modelRef,
    };
  }

  async #execTool(
    name: string,
    rawArgs: string,
    turn: Turn,
    effectId: string,
    span: string | undefined,
    onYield: () => void,
  ): Promise<Record<string, unknown>> {
    const { caller, ctx } = turn;
    let args: unknown = {};
    if (rawArgs.trim() !== "") {
      // A model's arguments are untrusted input like any request body: nesting is bounded too.
      const parsed = parseGuardedJson(rawArgs, DEFAULT_MAX_JSON_DEPTH);
      if (!parsed.ok) return { status: "error", error: `arguments for ${name} are ${parsed.message}` };
      args = parsed.value;
    }
    try {
      const out = await this.tools.invoke(
        name,
        args,
        {
          services: this.services,
          caller,
          signal: ctx.signal,
          effectId,
          yieldTurn: () => onYield(),
          traceparent: span,
        },
        // tools.approvals: allow, deny, or ask (the run waits here for an approver)
        (parsed, run) =>
          guardToolCall(
            this.services,
            {
              caller,
              tool: name,
              args: parsed,
              effectId,
              signal: ctx.signal,
              traceparent: span,
              traits: this.tools.traits(name),
              ...(turn.requester ? { requester: turn.requester } : {}),
            },
            run,
          ),
      );
      if (out.ok) return out.result;
      return { status: out.code === "FORBIDDEN" ? "forbidden" : "error", error: out.message };
    } catch (err) {
      if (err instanceof SwitchboardError) return { status: "error", error: err.message, code: err.code };
      this.services.logger.warn({ err, tool: name }, "tool failed");
      return { status: "error", error: `tool ${name} failed: ${errorMessage(err)}` };
    }
  }
}

/**
 * The id of a message a turn writes at model step `step`: `<runId>:s<step>:<part>` (`a` the
 * assistant message, `c<j>`/`r<j>` the j-th tool call and its result, `steer<i>` steering).
 * The user line is `<runId>:in`. Derived from the job only, so a re-run writes the same ids.
 */
export function stepId(runId: string, step: number, part: string): string {
  return `${runId}:s${step}:${part}`;
}

/**
 * The transcript tail as model step `step` of run `runId` first saw it: without what the run
 * wrote after that read (its assistant and tool messages of this step, anything of later steps;
 * steering of this step was written before the read and stays).
 *
 * The run writes its first inbound message (`<runId>:in`) before any step message, so the search
 * runs backwards from the newest message and stops there: a first attempt looks at the few
 * messages after it, not at the whole window (without that message in the tail, all of it).
 */
export function windowAt(tail: TranscriptMessage[], runId: string, step: number): TranscriptMessage[] {
  const prefix = `${runId}:s`;
  const after = (m: TranscriptMessage): boolean => {
    if (m.runId !== runId || !m.id.startsWith(prefix)) return false;
    const rest = m.id.slice(prefix.length);
    const n = Number.parseInt(rest, 10);
    if (!Number.isFinite(n)) return false;
    return n > step || (n === step && !rest.startsWith(`${n}:steer`));
  };
  const inbound = `${runId}:in`;
  for (let i = tail.length - 1; i >= 0; i--) {
    const m = tail[i]!;
    if (after(m)) return tail.filter((x) => !after(x));
    if (m.id === inbound) break;
  }
  return tail;
}

/**
 * The runs a turn answers (collected messages each had their own), whose budget holds its first
 * model call takes over, and which its handler gives back when the turn is over (turn-handler.ts).
 */
export function turnRunIds(job: TurnJob): string[] {
  const ids = [job.runId];
  for (const m of job.messages) if (m.runId !== job.runId) ids.push(m.runId);
  return ids;
}
