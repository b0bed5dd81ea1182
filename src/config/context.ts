import { z } from "zod";
import { parseDurationMs } from "./schedule.js";

/**
 * Config blocks for long conversations (API.md §7): pruning of old tool results before each
 * model call, compaction of the older transcript into a summary, session reset policies and the
 * per-channel chat commands `/new`, `/reset`, `/compact`. Kept in their own file so
 * `schema.ts` only wires them in.
 */

const duration = z
  .string()
  .trim()
  .refine((v) => parseDurationMs(v) !== null, { message: 'must be a duration like "5m", "30s" or "1h"' });

export const HARD_CLEAR_PLACEHOLDER = "[Old tool result content cleared]";

export const contextPruningSchema = z.strictObject({
  mode: z.enum(["off", "always", "cache-ttl"]).default("off"),
  /** cache-ttl: prune only when the last model call of the session is older than this. */
  ttl: duration.default("5m"),
  /** Tool results of the newest N assistant turns are never pruned. */
  keepLastAssistants: z.number().int().min(0).default(3),
  softTrim: z
    .strictObject({
      maxChars: z.number().int().min(1).default(4000),
      headChars: z.number().int().min(0).default(1500),
      tailChars: z.number().int().min(0).default(1500),
    })
    .prefault({}),
  hardClear: z
    .strictObject({
      enabled: z.boolean().default(true),
      placeholder: z.string().min(1).default(HARD_CLEAR_PLACEHOLDER),
    })
    .prefault({}),
  /** Past this share of the context window, prunable tool results are replaced by the placeholder. */
  hardClearRatio: z.number().min(0).max(1).default(0.5),
  /** Which tools' results may be pruned: `*` wildcards, case-insensitive, deny wins, empty allow = all. */
  tools: z
    .strictObject({ allow: z.array(z.string()).default([]), deny: z.array(z.string()).default([]) })
    .prefault({}),
});

export const compactionSchema = z.strictObject({
  enabled: z.boolean().default(true),
  /** Compact when the estimated prompt passes this share of the model's context window. */
  threshold: z.number().min(0.1).max(1).default(0.8),
  /** Model for the summary (`provider/model`); null = the session's model. */
  model: z
    .string()
    .regex(/^[^/\s]+\/\S+$/, 'must look like "<provider>/<model>"')
    .nullable()
    .default(null),
  /** The newest N user turns stay verbatim; the older part is summarised. */
  keepLastTurns: z.number().int().min(1).default(4),
});

/** Per-agent overrides (`agents.list[].contextPruning` / `.compaction`): unset fields inherit. */
export const contextPruningOverride = z
  .strictObject({
    mode: z.enum(["off", "always", "cache-ttl"]).optional(),
    ttl: duration.optional(),
    keepLastAssistants: z.number().int().min(0).optional(),
    softTrim: z
      .strictObject({
        maxChars: z.number().int().min(1).optional(),
        headChars: z.number().int().min(0).optional(),
        tailChars: z.number().int().min(0).optional(),
      })
      .optional(),
    hardClear: z
      .strictObject({ enabled: z.boolean().optional(), placeholder: z.string().min(1).optional() })
      .optional(),
    hardClearRatio: z.number().min(0).max(1).optional(),
    tools: z
      .strictObject({ allow: z.array(z.string()).optional(), deny: z.array(z.string()).optional() })
      .optional(),
  })
  .optional();

export const compactionOverride = z
  .strictObject({
    enabled: z.boolean().optional(),
    threshold: z.number().min(0.1).max(1).optional(),
    model: z
      .string()
      .regex(/^[^/\s]+\/\S+$/, 'must look like "<provider>/<model>"')
      .nullable()
      .optional(),
    keepLastTurns: z.number().int().min(1).optional(),
  })
  .optional();

const resetMode = z.enum(["off", "daily", "idle"]);
const atHour = z.number().int().min(0, "must be an hour 0-23").max(23, "must be an hour 0-23");
const idleMinutes = z.number().positive();

/** One reset rule; in byChatType/byChannel unset fields inherit from the level above. */
const resetRule = z.strictObject({
  mode: resetMode.optional(),
  atHour: atHour.optional(),
  idleMinutes: idleMinutes.optional(),
});

export const sessionResetSchema = z.strictObject({
  mode: resetMode.default("off"),
  /** daily: a session started before the most recent atHour:00 (gateway host time) starts over. */
  atHour: atHour.default(4),
  /** idle: a session whose last inbound message is older than this starts over. */
  idleMinutes: idleMinutes.default(1440),
  byChatType: z.strictObject({ direct: resetRule.optional(), group: resetRule.optional() }).prefault({}),
  byChannel: z.record(z.string(), resetRule).default({}),
});

/** Who may use a chat command in this channel: everyone allowed to talk, only owners, or nobody. */
const commandAccess = z.enum(["all", "owners", "off"]);

/** `channels.<name>.commands`: `reset` covers `/new` and `/reset`. */
export const channelCommandsSchema = z
  .strictObject({
    reset: commandAccess.default("all"),
    compact: commandAccess.default("all"),
  })
  .prefault({});

export type ContextPruningConfig = z.infer<typeof contextPruningSchema>;
export type CompactionConfig = z.infer<typeof compactionSchema>;
export type SessionResetConfig = z.infer<typeof sessionResetSchema>;
export type ChannelCommands = z.infer<typeof channelCommandsSchema>;
export type CommandAccess = z.infer<typeof commandAccess>;
