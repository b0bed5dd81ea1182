/**
 * Seeding helpers for the read-side tool tests: sessions and transcripts written straight
 * through the app's store (fast, no model runs), then read back through `tools.invoke`.
 */
import { randomUUID } from "node:crypto";
import { parseSessionKey } from "../../../src/sessions/keys.js";
import type { SessionEntry, TranscriptMessage } from "../../../src/store/types.js";
import type { TestApp } from "../../harness.js";

export type SeedInit = Partial<SessionEntry> & { ageMs?: number };

/** Puts an entry for `key` (agent from the key unless given), `ageMs` old (default: now). */
export async function seedSession(t: TestApp, key: string, init: SeedInit = {}): Promise<SessionEntry> {
  const { ageMs = 0, ...rest } = init;
  const at = Date.now() - ageMs;
  const entry: SessionEntry = {
    key,
    sessionId: randomUUID(),
    agentId: parseSessionKey(key).agentId ?? "main",
    createdAt: at,
    updatedAt: at,
    ...rest,
  };
  await t.app.services.store.sessions.put(entry);
  return entry;
}

/** A sub-agent entry spawned by `parent` (key `agent:<agent>:subagent:<uuid>`, depth parent+1). */
export async function seedChild(
  t: TestApp,
  parent: SessionEntry,
  init: SeedInit & { agent?: string } = {},
): Promise<SessionEntry> {
  const { agent = parent.agentId, ...rest } = init;
  return seedSession(t, `agent:${agent}:subagent:${randomUUID()}`, {
    agentId: agent,
    spawnedBy: parent.key,
    spawnDepth: (parent.spawnDepth ?? 0) + 1,
    ...rest,
  });
}

let clock = 0;

/** Appends one transcript line to `entry`'s current transcript. */
export async function say(
  t: TestApp,
  entry: SessionEntry,
  role: TranscriptMessage["role"],
  content: unknown,
  extra: Partial<TranscriptMessage> = {},
): Promise<TranscriptMessage> {
  const msg: TranscriptMessage = {
    id: randomUUID(),
    sessionId: entry.sessionId,
    role,
    content,
    timestamp: Date.now() + clock++,
    ...extra,
  };
  await t.app.services.store.transcripts.append({ agentId: entry.agentId, sessionId: entry.sessionId }, msg);
  return msg;
}
