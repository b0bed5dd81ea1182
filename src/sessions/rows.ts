import type { SessionEntry, SessionKind, TranscriptStore } from "../store/types.js";
import { classifyKind, deriveChannel } from "./keys.js";

/** Per-session verbosity (`sessions.patch` / `session_status` set it; rows show it). */
export const VERBOSE_LEVELS = ["off", "on", "full"] as const;
export type VerboseLevel = (typeof VERBOSE_LEVELS)[number];

/** The row shape of `sessions_list` / `sessions.list` (API.md §5). */
export interface SessionRow {
  key: string;
  kind: SessionKind;
  channel: string;
  displayName?: string;
  label?: string;
  agentId: string;
  updatedAt: number;
  sessionId: string;
  model?: string;
  contextTokens?: number;
  totalTokens?: number;
  thinkingLevel?: string;
  verboseLevel?: string;
  systemSent?: boolean;
  abortedLastRun?: boolean;
  sendPolicy?: "allow" | "deny";
  lastChannel?: string;
  lastTo?: string;
  deliveryContext?: { channel: string; to: string; accountId?: string };
  transcriptPath?: string;
  spawnedBy?: string;
  messages?: Array<{ role: string; content: unknown; timestamp: number }>;
  /** includeDerivedTitles: the first user message, sanitised, ≤ 60 chars. */
  derivedTitle?: string;
  /** includeLastMessage: the newest user/assistant message, sanitised and redacted, ≤ 200 chars. */
  lastMessage?: { role: "user" | "assistant"; text: string; at: number };
}

export function toRow(entry: SessionEntry, transcripts?: TranscriptStore, displayKey?: string): SessionRow {
  const row: SessionRow = {
    key: displayKey ?? entry.key,
    kind: classifyKind(entry.key),
    channel: deriveChannel(entry.key, entry),
    agentId: entry.agentId,
    updatedAt: entry.updatedAt,
    sessionId: entry.sessionId,
  };
  const copy = [
    "displayName",
    "label",
    "contextTokens",
    "totalTokens",
    "thinkingLevel",
    "verboseLevel",
    "systemSent",
    "abortedLastRun",
    "sendPolicy",
    "lastChannel",
    "lastTo",
    "spawnedBy",
  ] as const;
  for (const k of copy) {
    const v = entry[k];
    if (v !== undefined) (row as unknown as Record<string, unknown>)[k] = v;
  }
  // One definition of total tokens everywhere: input + output.
  if (entry.inputTokens !== undefined || entry.outputTokens !== undefined)
    row.totalTokens = (entry.inputTokens ?? 0) + (entry.outputTokens ?? 0);
  const model = entry.model ?? entry.lastModel;
  if (model) row.model = model;
  if (entry.deliveryContext) {
    const { channel, to, accountId } = entry.deliveryContext;
    row.deliveryContext = accountId ? { channel, to, accountId } : { channel, to };
  }
  if (transcripts)
    row.transcriptPath = transcripts.locate({ agentId: entry.agentId, sessionId: entry.sessionId });
  return row;
}
