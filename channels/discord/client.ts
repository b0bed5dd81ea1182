import { createRequire } from "node:module";
import {
  Client,
  GatewayIntentBits,
  Options,
  Partials,
  REST,
  type RESTOptions,
  SimpleShardingStrategy,
  type WebSocketOptions,
} from "discord.js";
import type { ResolvedDiscordChannelConfig } from "./types.js";

/**
 * Guild channel and thread events, guild messages, DMs, and message text. Message Content is a
 * privileged intent: without it enabled in the Developer Portal the gateway closes with 4014.
 */
export const DISCORD_INTENTS = [
  GatewayIntentBits.Guilds,
  GatewayIntentBits.GuildMessages,
  GatewayIntentBits.DirectMessages,
  GatewayIntentBits.MessageContent,
];

type Dispatcher = NonNullable<RESTOptions["agent"]>;
let agent: Dispatcher | undefined;

/**
 * The HTTP agent of every Discord REST client in the process, made by the undici that
 * @discordjs/rest itself loads. Without one, the SDK sends through the process's global
 * dispatcher, which is whichever undici was loaded first: Slack's socket mode brings undici 7,
 * and a gateway whose Slack channel started before its Discord channel failed every Discord
 * file upload with "action is not a function" (undici 6 hands a FormData body to an undici 7
 * Agent that reads it differently). Its idle sockets do not keep the process alive.
 */
function restAgent(): Dispatcher {
  if (!agent) {
    const fromDiscord = createRequire(createRequire(import.meta.url).resolve("discord.js"));
    const fromRest = createRequire(fromDiscord.resolve("@discordjs/rest"));
    const undici = fromRest("undici") as { Agent: new () => Dispatcher };
    agent = new undici.Agent();
  }
  return agent;
}

/**
 * REST settings shared by the gateway client and the outbound REST client. Delivery owns
 * retries, so the SDK does not retry; long rate limits are handed back (RateLimitError) and
 * the SDK's safety offset is off so retryAfter is exactly what Discord asked for. Requests go
 * through the SDK's own undici (`restAgent`).
 */
function restOptions(config: ResolvedDiscordChannelConfig): Partial<RESTOptions> {
  return {
    agent: restAgent(),
    ...(config.apiUrl ? { api: config.apiUrl } : {}),
    retries: 0,
    offset: 0,
    timeout: config.requestTimeoutMs,
    rejectOnRateLimit: (limit) => limit.retryAfter > config.maxRateLimitWaitMs,
  };
}

/** The outbound REST client; it lives as long as the adapter, independent of gateway restarts. */
export function createRest(config: ResolvedDiscordChannelConfig): REST {
  return new REST(restOptions(config)).setToken(config.token);
}

/**
 * A fresh gateway client per start(): a destroyed discord.js Client cannot log in again.
 * Reconnects and resumes are the SDK's; the adapter only watches the shard events.
 */
export function createGatewayClient(config: ResolvedDiscordChannelConfig): Client {
  return new Client({
    intents: DISCORD_INTENTS,
    // DM channels are not in the cache until a message arrives in them.
    partials: [Partials.Channel],
    rest: restOptions(config),
    // Messages are handed over and forgotten; caching them would only cost memory.
    makeCache: Options.cacheWithLimits({ ...Options.DefaultMakeCacheSettings, MessageManager: 0 }),
    ...(config.gatewayUrl ? { ws: { buildStrategy: gatewayOverride(config.gatewayUrl) } } : {}),
  });
}

type ShardManager = Parameters<NonNullable<WebSocketOptions["buildStrategy"]>>[0];

/**
 * discord.js has no gateway URL option: the URL comes from `GET /gateway/bot` and resumes go
 * to READY's `resume_gateway_url`. For a proxy (or a test fake) both are replaced here, on
 * this client's own shard manager, before the default strategy starts.
 */
function gatewayOverride(url: string): (manager: ShardManager) => SimpleShardingStrategy {
  return (manager) => {
    const fetchInfo = manager.fetchGatewayInformation.bind(manager);
    manager.fetchGatewayInformation = async (force?: boolean) => ({ ...(await fetchInfo(force)), url });
    const update = manager.options.updateSessionInfo;
    Object.assign(manager.options, {
      updateSessionInfo: (shardId: number, info: Parameters<typeof update>[1]) =>
        update(shardId, info ? { ...info, resumeURL: url } : info),
    });
    return new SimpleShardingStrategy(manager);
  };
}
