import type { ChannelCommands } from "./context.js";
import type { Config } from "./schema.js";

/**
 * One channel's section of the config read by the channel's name, for the code that serves every
 * channel alike (gates, delivery, typing, streaming, media limits, leases). The sections differ
 * (the web chat has no access lists, only Discord overrides thread lifetimes), so every field is
 * optional here; `ChannelSection` below keeps this in step with the schema: a section whose field
 * no longer fits fails to compile.
 */
export interface ChannelSettings {
  accounts?: Readonly<Record<string, unknown>>;
  enabled?: boolean;
  allowFrom?: string[];
  dmPolicy?: "pairing" | "allowlist" | "open" | "disabled";
  owners?: string[];
  groups?: { requireMention: boolean; mentionPatterns: string[] };
  /** Overrides of session.threadBindings (unset fields inherit). */
  threadBindings?: {
    enabled?: boolean | undefined;
    idleHours?: number | undefined;
    maxAgeHours?: number | undefined;
    defaultSpawnContext?: "fork" | "isolated" | undefined;
  };
  commands?: Partial<ChannelCommands>;
  mediaMaxMb?: number;
  streaming?: "partial" | "off" | "final";
  typing?: boolean;
  failureText?: string;
}

type Fits<T extends ChannelSettings> = T;
/** Any section of the schema; it compiles only while every section reads as ChannelSettings. */
export type ChannelSection = Fits<NonNullable<Config["channels"][keyof Config["channels"]]>>;

/** `channels.<channel>` of the config, or undefined for a channel that is not configured. */
export function channelSettings(
  config: Pick<Config, "channels">,
  channel: string,
): ChannelSettings | undefined {
  return Object.hasOwn(config.channels, channel)
    ? (config.channels as Readonly<Record<string, ChannelSettings | undefined>>)[channel]
    : undefined;
}
