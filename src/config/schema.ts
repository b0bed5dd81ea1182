import { z } from "zod";
import {
  channelCommandsSchema,
  compactionOverride,
  compactionSchema,
  contextPruningOverride,
  contextPruningSchema,
  sessionResetSchema,
} from "./context.js";
import { mcpSchema } from "./mcp.js";
import { mediaMaxMb, mediaSchema } from "./media.js";
import { parseDurationMs, type Schedule, scheduleProblems } from "./schedule.js";

/**
 * The whole config file, validated once. Every field has its default here, so the inferred
 * `Config` type is complete and no code scatters `??` defaults. Durations carry their unit in
 * the name and accept decimals (API.md §3).
 */

const agentId = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "agent id must match ^[a-z0-9][a-z0-9_-]{0,63}$");

const modelRef = z.string().regex(/^[^/\s]+\/\S+$/, 'must look like "<provider>/<model>"');

export const leasesSchema = z
  .strictObject({
    /** How long a lease lasts without renewal (ms): a dead gateway's accounts move after about this long. */
    ttlMs: z.number().int().min(500).max(600_000).default(10_000),
    /** How often each gateway renews or tries to take each account's lease (ms); at most ttlMs / 2. */
    renewMs: z.number().int().min(100).max(300_000).default(3000),
  })
  .superRefine((l, ctx) => {
    if (l.renewMs * 2 > l.ttlMs)
      ctx.addIssue({
        code: "custom",
        message: `must be at most ttlMs / 2 (${Math.floor(l.ttlMs / 2)}), so a lease survives one missed renewal`,
        path: ["renewMs"],
      });
  })
  .default({ ttlMs: 10_000, renewMs: 3000 });

export const gatewaySchema = z
  .strictObject({
    host: z.string().min(1).default("127.0.0.1"),
    port: z.number().int().min(0).max(65535).default(18790),
    auth: z
      // Any non-empty secret; one shorter than SHORT_TOKEN_CHARS is logged as guessable at start.
      .strictObject({ token: z.string().min(1, "must not be empty").optional() })
      .default({}),
    /** Largest accepted RPC body or WebSocket frame in bytes (default fits a 10 MB attachment call). */
    maxBodyBytes: z
      .number()
      .int()
      .positive()
      .default(16 * 1024 * 1024),
    /** Base URL the CLI uses to reach a running gateway; defaults to http://host:port. */
    url: z.string().url().optional(),
    // Local web security (API.md §7, docs/security.md).
    /** Host header names accepted besides loopback names and the bound address. */
    allowedHosts: z.array(z.string().trim().toLowerCase().min(1)).default([]),
    /** Browser Origins (`scheme://host[:port]`) accepted besides the gateway's own. */
    allowedOrigins: z.array(z.string().trim().toLowerCase().min(1)).default([]),
    /** Deepest `{`/`[` nesting accepted in a request body, frame or webhook body. */
    maxJsonDepth: z.number().int().min(2).max(1000).default(64),
    /** Largest accepted platform webhook body (/hooks/telegram, /hooks/slack) in bytes. */
    maxWebhookBodyBytes: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /**
     * Many gateways on the redis store (API.md §8.5): each channel account's live connection runs
     * in one gateway at a time under a lease of `ttlMs`, renewed every `renewMs`.
     */
    leases: leasesSchema,
    /** `GET /metrics` (Prometheus text format): the gateway's bearer token unless auth is "none". */
    metrics: z
      .strictObject({
        enabled: z.boolean().default(true),
        auth: z.enum(["token", "none"]).default("token"),
      })
      .default({ enabled: true, auth: "token" }),
  })
  .default({
    leases: { ttlMs: 10_000, renewMs: 3000 },
    host: "127.0.0.1",
    port: 18790,
    auth: {},
    maxBodyBytes: 16 * 1024 * 1024,
    allowedHosts: [],
    allowedOrigins: [],
    maxJsonDepth: 64,
    maxWebhookBodyBytes: 1024 * 1024,
    metrics: { enabled: true, auth: "token" },
  });

/** Traces over OTLP/HTTP (API.md §8.6): off (no SDK loaded) unless `otlp.endpoint` is set. */
export const telemetrySchema = z
  .strictObject({
    otlp: z
      .strictObject({
        /** Base URL of the collector; spans go to `<endpoint>/v1/traces`. */
        endpoint: z.string().url().optional(),
        headers: z.record(z.string(), z.string()).default({}),
      })
      .default({ headers: {} }),
    serviceName: z.string().min(1).default("switchboard"),
  })
  .default({ otlp: { headers: {} }, serviceName: "switchboard" });

/**
 * Default size of the transcript tail cache (`storage.transcriptCacheChars`, and either store's
 * `tailCacheChars` when it is created without config): about 12 MB of heap. 12M holds the bench's
 * 64-client phase (256 sessions of up to ~120 turns) with 14 fills per 100 turns, where 8M had 28
 * (each fill rereads a window from disk: ~0.5 ms of CPU).
 */
export const DEFAULT_TAIL_CACHE_CHARS = 12 * 1024 * 1024;

export const storageSchema = z
  .strictObject({
    driver: z.enum(["fs", "redis"]).default("fs"),
    redisUrl: z.string().default("redis://127.0.0.1:6379"),
    prefix: z.string().min(1).default("sb"),
    /** The in-memory transcript tail cache (both drivers), in characters of JSON; 0 turns it off. */
    transcriptCacheChars: z
      .number()
      .int()
      .min(0)
      .max(2 ** 30)
      .default(DEFAULT_TAIL_CACHE_CHARS),
  })
  .default({
    driver: "fs",
    redisUrl: "redis://127.0.0.1:6379",
    prefix: "sb",
    transcriptCacheChars: DEFAULT_TAIL_CACHE_CHARS,
  });

export const queueSchema = z
  .strictObject({
    driver: z.enum(["local", "bullmq"]).default("local"),
    redisUrl: z.string().default("redis://127.0.0.1:6379"),
    prefix: z.string().min(1).default("sb"),
    concurrency: z.number().int().min(1).max(1024).default(8),
    /** BullMQ lock duration; a crashed worker's turn is picked up after about lockDurationMs + stalledIntervalMs. */
    lockDurationMs: z.number().int().min(1000).default(5000),
    stalledIntervalMs: z.number().int().min(1000).default(5000),
    /** Inbound messages that arrive while a turn runs: `collect` folds them into one next turn. */
    mode: z.enum(["collect", "followup"]).default("collect"),
    /** bullmq: false keeps turns off `switchboard start` (only `switchboard worker` processes run jobs). */
    runTurns: z.boolean().default(true),
  })
  .default({
    driver: "local",
    redisUrl: "redis://127.0.0.1:6379",
    prefix: "sb",
    concurrency: 8,
    lockDurationMs: 5000,
    stalledIntervalMs: 5000,
    mode: "collect",
    runTurns: true,
  });

const priceSchema = z.strictObject({
  /** USD per million tokens. */
  inputPerMTok: z.number().min(0).default(0),
  outputPerMTok: z.number().min(0).default(0),
  cacheReadPerMTok: z.number().min(0).default(0),
  cacheWritePerMTok: z.number().min(0).default(0),
});

const modelInfoSchema = z.strictObject({
  contextTokens: z.number().int().positive().optional(),
  maxOutputTokens: z.number().int().positive().optional(),
  price: priceSchema.optional(),
  /** Takes images (API.md §8.1; unset = true); `false`: images reach it as a one-line note. */
  vision: z.boolean().optional(),
});

const providerCommon = {
  /** Per-model facts: context window, prices. Keys are model names without the provider. */
  models: z.record(z.string(), modelInfoSchema).default({}),
  timeoutMs: z.number().int().positive().default(120_000),
  maxRetries: z.number().int().min(0).max(10).default(2),
};

export const providerSchema = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("openai"),
    baseUrl: z.string().url().optional(),
    apiKey: z.string().optional(),
    headers: z.record(z.string(), z.string()).optional(),
    ...providerCommon,
  }),
  z.strictObject({
    kind: z.literal("anthropic"),
    baseUrl: z.string().url().optional(),
    apiKey: z.string().optional(),
    ...providerCommon,
  }),
  z.strictObject({
    kind: z.literal("scripted"),
    /** Optional JSON5 rules file; the built-in demo rules are used without one. */
    script: z.string().optional(),
    /** Inline rules (same shape as the file). */
    rules: z.array(z.unknown()).optional(),
    ...providerCommon,
  }),
]);

export const failoverSchema = z
  .strictObject({
    /** A 429's `retry-after` up to this is waited out on the same model; a longer one moves on. */
    maxRetryAfterMs: z.number().int().min(0).max(600_000).default(5000),
    /** How long a model whose circuit opened is skipped. */
    cooldownSeconds: z.number().min(0).max(86_400).default(60),
    /** Consecutive failed calls that open a model's circuit. */
    failuresToOpen: z.number().int().min(1).max(1000).default(3),
  })
  .default({ maxRetryAfterMs: 5000, cooldownSeconds: 60, failuresToOpen: 3 });

export const modelsSchema = z
  .strictObject({
    default: modelRef.optional(),
    providers: z.record(z.string(), providerSchema).default({}),
    /** What per-agent or per-session `model` overrides may name; `provider/*` globs allowed. Empty = any configured. */
    allowed: z.array(z.string()).default([]),
    /** Models tried in order when the agent's model fails (API.md §8.4); an agent's own `fallbacks` replace these. */
    fallbacks: z.array(modelRef).max(10).default([]),
    failover: failoverSchema,
  })
  .default({
    providers: {},
    allowed: [],
    fallbacks: [],
    failover: { maxRetryAfterMs: 5000, cooldownSeconds: 60, failuresToOpen: 3 },
  });

const sendPolicyMatch = z.strictObject({
  channel: z.string().optional(),
  chatType: z.enum(["direct", "dm", "group", "channel"]).optional(),
  keyPrefix: z.string().optional(),
});

export const sendPolicySchema = z
  .strictObject({
    rules: z.array(z.strictObject({ match: sendPolicyMatch, action: z.enum(["allow", "deny"]) })).default([]),
    default: z.enum(["allow", "deny"]).default("allow"),
  })
  .default({ rules: [], default: "allow" });

/**
 * API.md §3: an out-of-range value is a config error naming the path; decimals are floored
 * (SEMANTICS §3). Runtime code clamps again with `clampPingPongTurns` for values from elsewhere.
 */
export const MAX_PING_PONG_TURNS = 20;
const pingPongTurns = z
  .number({ error: `must be a number between 0 and ${MAX_PING_PONG_TURNS}` })
  .min(0, `must be between 0 and ${MAX_PING_PONG_TURNS}`)
  .max(MAX_PING_PONG_TURNS, `must be between 0 and ${MAX_PING_PONG_TURNS}`)
  .transform((v) => Math.floor(v));

/** Values from anywhere but the config file: non-numbers → 5, decimals floored, clamped to 0..20. */
export function clampPingPongTurns(v: unknown): number {
  if (typeof v !== "number" || Number.isNaN(v)) return 5;
  return Math.min(MAX_PING_PONG_TURNS, Math.max(0, Math.floor(v)));
}

const threadBindingsSchema = z.strictObject({
  enabled: z.boolean().default(true),
  idleHours: z.number().min(0).default(24),
  maxAgeHours: z.number().min(0).default(0),
  /** What `sessions_spawn` with `thread: true` gives the child by default (SEMANTICS §3 `context`). */
  defaultSpawnContext: z.enum(["fork", "isolated"]).default("fork"),
});

export const sessionSchema = z
  .strictObject({
    scope: z.enum(["per-sender", "global"]).default("per-sender"),
    dmScope: z.enum(["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]).default("main"),
    identityLinks: z.record(z.string(), z.array(z.string())).default({}),
    sendPolicy: sendPolicySchema,
    agentToAgent: z
      .strictObject({ maxPingPongTurns: pingPongTurns.default(5) })
      .default({ maxPingPongTurns: 5 }),
    threadBindings: threadBindingsSchema.default({
      enabled: true,
      idleHours: 24,
      maxAgeHours: 0,
      defaultSpawnContext: "fork",
    }),
    reset: sessionResetSchema.prefault({}),
  })
  .prefault({
    scope: "per-sender",
    dmScope: "main",
    identityLinks: {},
    sendPolicy: { rules: [], default: "allow" },
    agentToAgent: { maxPingPongTurns: 5 },
    threadBindings: { enabled: true, idleHours: 24, maxAgeHours: 0, defaultSpawnContext: "fork" },
  });

const allowDeny = z.strictObject({
  allow: z.array(z.string()).default([]),
  deny: z.array(z.string()).default([]),
});

/** `tools.approvals` (API.md §8.3): allow / ask / deny per tool call. */
export const approvalRuleSchema = z.strictObject({
  /** Tool name as the model sees it; `*` globs (`files__*`). */
  tool: z.string().min(1),
  action: z.enum(["allow", "ask", "deny"]),
  /** Argument name → glob over its value as text (`*` within a path segment, `**` across). */
  args: z.record(z.string(), z.string()).optional(),
});

export const approvalsSchema = z
  .strictObject({
    default: z.enum(["auto", "allow", "ask", "deny"]).default("auto"),
    rules: z.array(approvalRuleSchema).default([]),
    approvers: z
      .union([z.enum(["owners", "requester"]), z.array(z.string().min(1)).min(1)])
      .default("owners"),
    timeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(7 * 24 * 3600)
      .default(600),
  })
  .default({ default: "auto", rules: [], approvers: "owners", timeoutSeconds: 600 });

export type ApprovalsConfig = z.output<typeof approvalsSchema>;

export const toolsSchema = z
  .strictObject({
    profile: z.enum(["minimal", "messaging", "coding", "full"]).default("coding"),
    alsoAllow: z.array(z.string()).default([]),
    deny: z.array(z.string()).default([]),
    sessions: z
      .strictObject({ visibility: z.enum(["self", "tree", "agent", "all"]).default("tree") })
      .default({ visibility: "tree" }),
    subagents: z
      .strictObject({ tools: allowDeny.default({ allow: [], deny: [] }) })
      .default({ tools: { allow: [], deny: [] } }),
    sessions_spawn: z
      .strictObject({
        attachments: z
          .strictObject({
            enabled: z.boolean().default(false),
            maxFiles: z.number().int().min(0).default(50),
            maxFileBytes: z
              .number()
              .int()
              .min(0)
              .default(1024 * 1024),
            maxTotalBytes: z
              .number()
              .int()
              .min(0)
              .default(5 * 1024 * 1024),
          })
          .default({ enabled: false, maxFiles: 50, maxFileBytes: 1048576, maxTotalBytes: 5242880 }),
      })
      .default({
        attachments: { enabled: false, maxFiles: 50, maxFileBytes: 1048576, maxTotalBytes: 5242880 },
      }),
    agentToAgent: z
      .strictObject({ enabled: z.boolean().default(false), allow: z.array(z.string()).default([]) })
      .default({ enabled: false, allow: [] }),
    approvals: approvalsSchema,
  })
  .default({
    profile: "coding",
    alsoAllow: [],
    deny: [],
    sessions: { visibility: "tree" },
    subagents: { tools: { allow: [], deny: [] } },
    sessions_spawn: {
      attachments: { enabled: false, maxFiles: 50, maxFileBytes: 1048576, maxTotalBytes: 5242880 },
    },
    agentToAgent: { enabled: false, allow: [] },
    approvals: { default: "auto", rules: [], approvers: "owners", timeoutSeconds: 600 },
  });

const subagentDefaults = z.strictObject({
  archiveAfterMinutes: z.number().min(0).default(60),
  runTimeoutSeconds: z.number().min(0).default(0),
  maxSpawnDepth: z.number().int().min(1).max(5).default(1),
  maxChildren: z.number().int().min(1).max(100).default(5),
});

const sandboxSchema = z.strictObject({
  mode: z.enum(["off", "all"]).default("off"),
  sessionToolsVisibility: z.enum(["spawned", "all"]).default("spawned"),
});

const agentToolsOverride = z.strictObject({
  profile: z.enum(["minimal", "messaging", "coding", "full"]).optional(),
  alsoAllow: z.array(z.string()).optional(),
  deny: z.array(z.string()).optional(),
});

/** An agent's model: a ref, or a primary with its own fallbacks (API.md §8.4). */
const agentModel = z.union([
  modelRef,
  z.strictObject({ primary: modelRef, fallbacks: z.array(modelRef).max(10).default([]) }),
]);

const agentFields = z.strictObject({
  id: agentId,
  name: z.string().optional(),
  model: agentModel.optional(),
  systemPrompt: z.string().optional(),
  workspace: z.string().optional(),
  maxToolSteps: z.number().int().min(1).max(200).optional(),
  thinkingLevel: z.enum(["off", "minimal", "low", "medium", "high"]).optional(),
  subagents: z
    .strictObject({
      allowAgents: z.array(z.string()).default([]),
      archiveAfterMinutes: z.number().min(0).optional(),
      runTimeoutSeconds: z.number().min(0).optional(),
      maxSpawnDepth: z.number().int().min(1).max(5).optional(),
      maxChildren: z.number().int().min(1).max(100).optional(),
    })
    .optional(),
  sandbox: z.strictObject({ mode: z.enum(["off", "all"]).optional() }).optional(),
  tools: agentToolsOverride.optional(),
  /** Names in `mcp.servers` whose tools this agent may use (default: none). */
  mcp: z.array(z.string()).optional(),
  contextPruning: contextPruningOverride,
  compaction: compactionOverride,
});

/**
 * An agent as the rest of the code reads it: `model` is always the primary ref; `fallbacks` is
 * set when the agent names its own (`model: { primary, fallbacks }`), else the global ones apply.
 */
export const agentSchema = agentFields.transform((a) => {
  if (a.model === undefined || typeof a.model === "string")
    return a as Omit<typeof a, "model"> & { model?: string; fallbacks?: string[] };
  const { model, ...rest } = a;
  return { ...rest, model: model.primary, fallbacks: model.fallbacks };
});

export const agentsSchema = z
  .strictObject({
    defaults: z
      .strictObject({
        model: modelRef.optional(),
        maxToolSteps: z.number().int().min(1).max(200).default(25),
        /** Share of the model's context window the transcript window may fill. */
        contextBudgetRatio: z.number().min(0.1).max(1).default(0.8),
        subagents: subagentDefaults.default({
          archiveAfterMinutes: 60,
          runTimeoutSeconds: 0,
          maxSpawnDepth: 1,
          maxChildren: 5,
        }),
        sandbox: sandboxSchema.default({ mode: "off", sessionToolsVisibility: "spawned" }),
        contextPruning: contextPruningSchema.prefault({}),
        compaction: compactionSchema.prefault({}),
      })
      .prefault({
        maxToolSteps: 25,
        contextBudgetRatio: 0.8,
        subagents: { archiveAfterMinutes: 60, runTimeoutSeconds: 0, maxSpawnDepth: 1, maxChildren: 5 },
        sandbox: { mode: "off", sessionToolsVisibility: "spawned" },
      }),
    list: z.array(agentSchema).default([{ id: "main", name: "Main" }]),
  })
  .prefault({
    defaults: {
      maxToolSteps: 25,
      contextBudgetRatio: 0.8,
      subagents: { archiveAfterMinutes: 60, runTimeoutSeconds: 0, maxSpawnDepth: 1, maxChildren: 5 },
      sandbox: { mode: "off", sessionToolsVisibility: "spawned" },
    },
    list: [{ id: "main", name: "Main" }],
  });

export const bindingSchema = z.strictObject({
  agentId,
  match: z.strictObject({
    channel: z.string().optional(),
    accountId: z.string().optional(),
    peer: z.strictObject({ kind: z.enum(["direct", "group", "channel"]), id: z.string() }).optional(),
  }),
});

const groupsSchema = z.strictObject({
  requireMention: z.boolean().default(true),
  mentionPatterns: z.array(z.string()).default([]),
});

const channelCommon = {
  /** Senders let in without pairing; "*" = everyone (API.md §7). */
  allowFrom: z.array(z.string()).default([]),
  /** Unknown DM senders: `pairing` (a one-time code the owner approves), `allowlist`, `open`, `disabled`. */
  dmPolicy: z.enum(["pairing", "allowlist", "open", "disabled"]).default("pairing"),
  owners: z.array(z.string()).default([]),
  groups: groupsSchema.default({ requireMention: true, mentionPatterns: [] }),
  /** Per-channel override of session.threadBindings.defaultSpawnContext. */
  threadBindings: z.strictObject({ defaultSpawnContext: z.enum(["fork", "isolated"]).optional() }).optional(),
  commands: channelCommandsSchema,
};

/** What a failed turn posts to the chat: short and non-technical (the cause goes to the log and dashboard). */
export const DEFAULT_FAILURE_TEXT = "Sorry, I couldn't finish that reply. Please try again in a moment.";

/**
 * How a channel shows a turn in progress (API.md §7): `streaming` "partial" edits a preview
 * message as text arrives, "final" posts the finished reply once (the model still streams to
 * `/ws`), "off" asks the model not to stream; `typing` shows the platform's indicator;
 * `failureText` is the line a failed turn posts.
 */
const channelLiveness = (streaming: "partial" | "off" | "final") => ({
  streaming: z.enum(["partial", "off", "final"]).default(streaming),
  typing: z.boolean().default(true),
  failureText: z.string().trim().min(1).max(500).default(DEFAULT_FAILURE_TEXT),
});

export const channelsSchema = z
  .strictObject({
    telegram: z
      .strictObject({
        accounts: z.record(
          z.string(),
          z.strictObject({
            token: z.string().min(1),
            apiRoot: z.string().url().optional(),
            mode: z.enum(["polling", "webhook"]).default("polling"),
            webhookSecret: z.string().optional(),
            webhookUrl: z.string().url().optional(),
          }),
        ),
        ...channelCommon,
        mediaMaxMb: mediaMaxMb(20),
        ...channelLiveness("partial"),
      })
      .optional(),
    slack: z
      .strictObject({
        accounts: z.record(
          z.string(),
          z.strictObject({
            botToken: z.string().min(1),
            appToken: z.string().optional(),
            signingSecret: z.string().optional(),
            mode: z.enum(["socket", "http"]).default("socket"),
            apiUrl: z.string().url().optional(),
          }),
        ),
        ...channelCommon,
        mediaMaxMb: mediaMaxMb(20),
        ...channelLiveness("partial"),
      })
      .optional(),
    discord: z
      .strictObject({
        accounts: z.record(
          z.string(),
          z.strictObject({
            token: z.string().min(1),
            apiUrl: z.string().url().optional(),
            gatewayUrl: z.string().optional(),
          }),
        ),
        ...channelCommon,
        mediaMaxMb: mediaMaxMb(25),
        ...channelLiveness("partial"),
        /** Per-channel overrides of session.threadBindings (unset fields inherit). */
        threadBindings: z
          .strictObject({
            enabled: z.boolean().optional(),
            idleHours: z.number().min(0).optional(),
            maxAgeHours: z.number().min(0).optional(),
            defaultSpawnContext: z.enum(["fork", "isolated"]).optional(),
          })
          .default({}),
      })
      .optional(),
    whatsapp: z
      .strictObject({
        accounts: z.record(z.string(), z.strictObject({ authDir: z.string().optional() })),
        ...channelCommon,
        allowFrom: z.array(z.string()).default([]),
        mediaMaxMb: mediaMaxMb(50),
        ...channelLiveness("final"),
      })
      .optional(),
    webchat: z
      .strictObject({
        enabled: z.boolean().default(true),
        mediaMaxMb: mediaMaxMb(20),
        ...channelLiveness("partial"),
      })
      .prefault({}),
  })
  .prefault({});

// ─── cron and hooks (API.md §7) ──────────────────────────────────────────────────────────────

const durationText = z.string().refine((v) => parseDurationMs(v) !== null, {
  message: 'must be a duration like "30s", "10m", "24h" or "1d"',
});

/** A job's schedule: exactly one of `cron` (+ optional IANA `tz`, default UTC), `every`, `at`. */
export const cronScheduleSchema = z
  .strictObject({
    cron: z.string().min(1).optional(),
    tz: z.string().min(1).optional(),
    every: z.string().min(1).optional(),
    at: z.string().min(1).optional(),
  })
  .superRefine((s, ctx) => {
    for (const [field, message] of scheduleProblems(s))
      ctx.addIssue({ code: "custom", message, path: field ? [field] : [] });
  })
  .transform((s): Schedule => {
    if (s.cron !== undefined) return s.tz !== undefined ? { cron: s.cron, tz: s.tz } : { cron: s.cron };
    if (s.every !== undefined) return { every: s.every };
    return { at: s.at ?? "" };
  });

/**
 * Where a job's reply goes: `announce` to an explicit chat, `announce` with `to: "last"` to the
 * chat the session `from` last talked in, or `none`.
 */
export const cronDeliverySchema = z
  .strictObject({
    mode: z.enum(["announce", "none"]),
    channel: z.string().min(1).optional(),
    to: z.string().min(1).optional(),
    accountId: z.string().min(1).optional(),
    threadId: z.string().min(1).optional(),
    from: z.string().min(1).optional(),
  })
  .superRefine((d, ctx) => {
    if (d.mode === "none") {
      for (const k of ["channel", "to", "accountId", "threadId", "from"] as const)
        if (d[k] !== undefined)
          ctx.addIssue({ code: "custom", message: 'not allowed with mode "none"', path: [k] });
      return;
    }
    if (d.to === undefined) {
      ctx.addIssue({
        code: "custom",
        message: 'required with mode "announce" (a chat id or "last")',
        path: ["to"],
      });
      return;
    }
    if (d.to === "last") {
      if (d.from === undefined)
        ctx.addIssue({
          code: "custom",
          message: 'required with to "last": the session whose last chat is used',
          path: ["from"],
        });
      for (const k of ["channel", "accountId", "threadId"] as const)
        if (d[k] !== undefined)
          ctx.addIssue({ code: "custom", message: 'not allowed with to "last"', path: [k] });
    } else {
      if (d.channel === undefined)
        ctx.addIssue({ code: "custom", message: "required with an explicit `to`", path: ["channel"] });
      if (d.from !== undefined)
        ctx.addIssue({ code: "custom", message: 'only allowed with to "last"', path: ["from"] });
    }
  });

export const CRON_JOB_ID_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;

const cronJobFields = {
  agentId: agentId.default("main"),
  enabled: z.boolean().default(true),
  schedule: cronScheduleSchema,
  message: z.string().min(1).max(32_000),
  model: modelRef.optional(),
  session: z.enum(["persistent", "isolated"]).default("persistent"),
  delivery: cronDeliverySchema.default({ mode: "none" }),
  catchUp: z.enum(["once", "skip"]).default("once"),
  /**
   * `at` schedules: delete the job after a successful run (default true there). Accepted on any
   * schedule (API.md §7's example sets it on a cron job); it has no effect on the others.
   */
  deleteAfterRun: z.boolean().optional(),
};

export const cronJobSchema = z.strictObject({
  id: z.string().trim().toLowerCase().regex(CRON_JOB_ID_RE, "job id must match ^[a-z0-9][a-z0-9_-]{0,63}$"),
  ...cronJobFields,
});

export const cronSchema = z
  .strictObject({
    enabled: z.boolean().default(true),
    /** Isolated run sessions (`cron:<id>:run:<uuid>`) are pruned this long after their last update. */
    sessionRetention: durationText.default("24h"),
    jobs: z.array(cronJobSchema).default([]),
  })
  .superRefine((c, ctx) => {
    const seen = new Set<string>();
    c.jobs.forEach((j, i) => {
      if (seen.has(j.id))
        ctx.addIssue({ code: "custom", message: `duplicate job id "${j.id}"`, path: ["jobs", i, "id"] });
      seen.add(j.id);
    });
  })
  .default({ enabled: true, sessionRetention: "24h", jobs: [] });

export const hooksSchema = z
  .strictObject({
    enabled: z.boolean().default(false),
    /** Bearer token of `POST /hooks/agent`; required when enabled and never the gateway token. */
    token: z.string().min(1, "must not be empty").optional(),
    /** Let callers name any session key (default: only `hook:…` keys). */
    allowAnySessionKey: z.boolean().default(false),
    maxBodyBytes: z
      .number()
      .int()
      .min(1)
      .max(32 * 1024 * 1024)
      .default(262_144),
    ratePerMinute: z.number().int().min(1).max(100_000).default(60),
  })
  .superRefine((h, ctx) => {
    if (h.enabled && !h.token)
      ctx.addIssue({
        code: "custom",
        message: "required when hooks.enabled is true (a dedicated secret, not the gateway token)",
        path: ["token"],
      });
  })
  .default({ enabled: false, allowAnySessionKey: false, maxBodyBytes: 262_144, ratePerMinute: 60 });

/** A spending limit (API.md §8.4). */
export const budgetSchema = z
  .strictObject({
    scope: z
      .string()
      .regex(
        /^(global|agent:\S+|session:\S+|channel:\S+)$/,
        'must be "global", "agent:<id>", "session:<key>" or "channel:<name>"',
      ),
    period: z.enum(["day", "month"]).default("day"),
    maxCostUsd: z.number().min(0).max(1_000_000).nullable().default(null),
    maxTokens: z.number().int().min(0).nullable().default(null),
    warnAt: z.number().min(0).max(1).default(0.8),
    action: z.enum(["block", "warn"]).default("block"),
  })
  .refine((b) => b.maxCostUsd !== null || b.maxTokens !== null, {
    message: "needs maxCostUsd or maxTokens",
  });

export const usageSchema = z
  .strictObject({ budgets: z.array(budgetSchema).default([]) })
  .default({ budgets: [] });

/** A price above this (USD per million tokens) is a typo, not a model. */
const MAX_PRICE_PER_MTOK = 1000;

export const configSchema = z
  .strictObject({
    /** For editors (schema/switchboard.schema.json); ignored. */
    $schema: z.string().optional(),
    gateway: gatewaySchema,
    stateDir: z.string().min(1).default("./.switchboard"),
    logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    storage: storageSchema,
    queue: queueSchema,
    models: modelsSchema,
    session: sessionSchema,
    tools: toolsSchema,
    agents: agentsSchema,
    bindings: z.array(bindingSchema).default([]),
    channels: channelsSchema,
    cron: cronSchema,
    hooks: hooksSchema,
    media: mediaSchema,
    mcp: mcpSchema,
    usage: usageSchema,
    telemetry: telemetrySchema,
  })
  .superRefine((c, ctx) => {
    c.usage.budgets.forEach((b, i) => {
      const [kind, ...rest] = b.scope.split(":");
      const name = rest.join(":");
      const miss = (what: string) =>
        ctx.addIssue({
          code: "custom",
          message: `matches nothing: ${what}`,
          path: ["usage", "budgets", i, "scope"],
        });
      if (kind === "agent" && !c.agents.list.some((a) => a.id === name))
        miss(`agent "${name}" is not configured (agents.list)`);
      if (kind === "channel" && name !== "webchat" && !(c.channels as Record<string, unknown>)[name])
        miss(`channel "${name}" is not configured (channels)`);
    });
    for (const [id, p] of Object.entries(c.models.providers))
      for (const [m, info] of Object.entries(p.models))
        for (const [k, v] of Object.entries(info.price ?? {}))
          if (v > MAX_PRICE_PER_MTOK)
            ctx.addIssue({
              code: "custom",
              message: `${v} USD per million tokens is not a plausible price (at most ${MAX_PRICE_PER_MTOK})`,
              path: ["models", "providers", id, "models", m, "price", k],
            });
    if (c.hooks.token && c.gateway.auth.token && c.hooks.token === c.gateway.auth.token)
      ctx.addIssue({
        code: "custom",
        message: "must differ from gateway.auth.token",
        path: ["hooks", "token"],
      });
    const agents = new Set(c.agents.list.map((a) => a.id));
    c.agents.list.forEach((a, i) => {
      a.mcp?.forEach((name, j) => {
        if (!Object.hasOwn(c.mcp.servers, name))
          ctx.addIssue({
            code: "custom",
            message: `MCP server "${name}" is not configured (mcp.servers)`,
            path: ["agents", "list", i, "mcp", j],
          });
      });
    });
    c.cron.jobs.forEach((j, i) => {
      if (!agents.has(j.agentId))
        ctx.addIssue({
          code: "custom",
          message: `agent "${j.agentId}" is not configured (agents.list)`,
          path: ["cron", "jobs", i, "agentId"],
        });
    });
  });

export type Config = z.infer<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;
export type AgentConfig = z.infer<typeof agentSchema>;
export type ProviderConfig = z.infer<typeof providerSchema>;
export type Binding = z.infer<typeof bindingSchema>;
export type CronJobConfig = z.infer<typeof cronJobSchema>;
export type CronDelivery = z.infer<typeof cronDeliverySchema>;
export type HooksConfig = z.infer<typeof hooksSchema>;
