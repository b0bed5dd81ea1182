import type { Services } from "../services/index.js";
import type { ToolCaller } from "../sessions/caller.js";
import type { AttachmentInput } from "./attachments.js";

/**
 * The shapes the wing's steps share (a spawn: plan.ts, limits.ts, prompts.ts, apply.ts; and
 * kill.ts, steer.ts): the arguments `sessions_spawn` parsed, what a step works with, and how it
 * answers — with the tool's result, or with a refusal or an error the tool returns as is.
 */

/** The arguments of `sessions_spawn` as its schema (src/tools/sessions-spawn.ts) parses them. */
export interface SpawnArgs {
  task: string;
  label?: string | undefined;
  agentId?: string | undefined;
  model?: string | undefined;
  thinking?: string | undefined;
  runTimeoutSeconds?: number | undefined;
  thread?: boolean | undefined;
  mode?: "run" | "session" | undefined;
  cleanup?: "delete" | "keep" | undefined;
  sandbox?: "inherit" | "require" | undefined;
  attachments?: AttachmentInput[] | undefined;
  attachAs?: { mountPath?: string | undefined } | undefined;
  context?: "isolated" | "fork" | undefined;
  runtime?: "subagent" | "acp" | undefined;
}

/**
 * What a step works with: the services, its caller and, while a model turn runs, the tool call's
 * effect id and span (a run it submits links to it: telemetry/trace.ts).
 */
export interface SpawnCtx {
  services: Services;
  caller: ToolCaller;
  effectId?: string | undefined;
  traceparent?: string | undefined;
}

/** What a sub-agent tool returns: a `status` and its fields. */
export type SpawnResult = Record<string, unknown>;

export const forbidden = (error: string): SpawnResult => ({ status: "forbidden", error });
export const failed = (error: string, extra: Record<string, unknown> = {}): SpawnResult => ({
  status: "error",
  error,
  ...extra,
});

/** A check's outcome: the value it decided, or the refusal the tool returns. */
export type Checked<T> = { ok: true; value: T } | { ok: false; result: SpawnResult };
export const refuse = (result: SpawnResult) => ({ ok: false as const, result });
