import type { InboundMessage } from "../channels/types.js";
import type { Services } from "../services/index.js";
import type { SessionEntry } from "../store/types.js";

/** Channel-level settings the gates read (API.md §3 channels.<name>), with defaults filled. */
export interface ChannelPolicy {
  allowFrom: string[];
  dmPolicy: "pairing" | "allowlist" | "open" | "disabled";
  owners: string[];
  requireMention: boolean;
  mentionPatterns: string[];
}

/**
 * What the router and its gates use: sessions, kv and the outbox (store), the channel settings
 * (config), replies to commands (channels, delivery), accepted turns (pipeline), session events
 * (bus, clock), the `/status` card (models, version) and logs. Not the paths nor cron.
 */
export type RouterDeps = Pick<
  Services,
  "config" | "store" | "now" | "bus" | "logger" | "channels" | "delivery" | "pipeline" | "models" | "version"
> &
  /** Spending limits (API.md §8.4): a spent `block` budget refuses the turn. */
  Partial<Pick<Services, "usage">>;

/** What every gate sees. */
export interface InboundCtx {
  msg: InboundMessage;
  services: RouterDeps;
  policy: ChannelPolicy;
  /** Why the message was dropped, for logs and tests. */
  dropped?: string;
}

/** After routing: agent and session are known (widened by declaration, never by cast). */
export type RoutedCtx = InboundCtx & {
  agentId: string;
  sessionKey: string;
  /** null until the first accepted message creates the session. */
  entry: SessionEntry | null;
  /** How the agent was chosen (binding level), for logs. */
  matchedBy: string;
};
