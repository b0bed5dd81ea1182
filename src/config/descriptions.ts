/**
 * One sentence per config key for docs/configuration.md and the editor schema, by path
 * (`<provider>`, `<account>`, `<name>` for record keys, `[]` for list items). A key without an
 * entry still appears in the reference, with its type and default. Keep entries short.
 */
export const CONFIG_DESCRIPTIONS: Record<string, string> = {
  $schema: "Path or URL of this JSON Schema, for editors; ignored by Switchboard.",
  gateway: "The HTTP/WebSocket server: RPC, web chat, dashboard, health and platform webhooks.",
  "gateway.host":
    "Address to bind. Anything that does not resolve to loopback only requires a configured token.",
  "gateway.port": "Port to listen on (0 = any free port).",
  "gateway.auth.token":
    "Bearer token for RPC, WebSocket, web chat and dashboard. Use ${VAR} to keep it out of the file. Unset: one is generated into stateDir/gateway.token (0600).",
  "gateway.maxBodyBytes":
    "Largest accepted RPC body or WebSocket frame in bytes (the default fits a 10 MB attachment call).",
  "gateway.maxJsonDepth":
    "Deepest {/[ nesting accepted in a body, frame, webhook body or model tool arguments.",
  "gateway.maxWebhookBodyBytes":
    "Largest accepted platform webhook body (/hooks/telegram, /hooks/slack) in bytes.",
  "gateway.leases":
    'Many gateways on storage.driver "redis": each channel account\'s live connection (Telegram long polling, Discord gateway, Slack Socket Mode, WhatsApp socket) runs in one gateway at a time under a fenced lease in Redis.',
  "gateway.leases.ttlMs":
    "How long a lease lasts without renewal (ms): a dead gateway's accounts move to another after at most ttlMs + renewMs.",
  "gateway.leases.renewMs":
    "How often each gateway renews (or tries to take) each account's lease, one Redis command each (ms); at most ttlMs / 2.",
  "gateway.url": "Base URL the CLI uses to reach a running gateway; default http://host:port.",
  "gateway.allowedHosts": "Host header names accepted besides loopback names and the bound address.",
  "gateway.allowedOrigins": "Browser origins accepted besides the gateway's own.",
  "gateway.metrics":
    "GET /metrics: Prometheus text format (turns, model calls, queue, deliveries, channels, cost, process).",
  "gateway.metrics.enabled": "Serve GET /metrics (and count; a worker serves its own with --metrics-port).",
  "gateway.metrics.auth":
    "token: the gateway bearer token is required (Authorization: Bearer …). none: anyone who reaches the port may scrape.",
  telemetry: "Traces over OTLP/HTTP: off (no SDK loaded) until telemetry.otlp.endpoint is set.",
  "telemetry.otlp.endpoint":
    "Base URL of an OTLP/HTTP collector (e.g. http://127.0.0.1:4318); spans are POSTed to <endpoint>/v1/traces.",
  "telemetry.otlp.headers": "Extra HTTP headers on every export (e.g. an API key of a hosted collector).",
  "telemetry.serviceName": "The service.name resource attribute of every span.",
  stateDir: "Where the fs store, the local queue's journal, the lock and channel credentials live.",
  logLevel: "pino log level (SWITCHBOARD_LOG_LEVEL overrides it).",
  storage: "Where sessions and transcripts are stored.",
  "storage.driver": "fs: files under stateDir (one machine). redis: Redis (several processes).",
  "storage.redisUrl": "Redis URL for the redis driver.",
  "storage.prefix": "Prefix of every Redis key.",
  "storage.transcriptCacheChars":
    "Characters of transcript JSON kept in memory as the newest messages of recently used sessions (about 1 byte of heap each, 12M by default), so a turn reads its window without the disk or Redis; 0 turns it off. Raise it when many long sessions are active at once (gateway health: transcriptCache.fills).",
  queue: "The pipeline that runs turns and follow-up jobs.",
  "queue.driver": "local: in-process, journaled to stateDir. bullmq: BullMQ on Redis, for workers.",
  "queue.redisUrl": "Redis URL for the bullmq driver.",
  "queue.prefix": "Prefix of the BullMQ queues.",
  "queue.concurrency":
    "Turns run in parallel per process (turns of one session never overlap). A turn holds its slot while the model answers: raise it when many conversations are in flight at once (docs/operations.md, Throughput). On the `local` driver a turn whose handler returned lends its slot to the next turn while it writes its outcome; its session's next turn still waits for that write, and at most this many turns are finishing so at once.",
  "queue.lockDurationMs":
    "BullMQ lock duration; a crashed worker's turn is picked up after about lockDurationMs + stalledIntervalMs.",
  "queue.stalledIntervalMs": "How often BullMQ looks for stalled jobs.",
  "queue.runTurns":
    "bullmq only. false: `switchboard start` runs no turns or jobs itself (it accepts, streams and delivers); `switchboard worker` processes run them all. The local queue needs true.",
  "queue.mode":
    "Messages that arrive while a turn runs: collect folds them into one next turn; followup runs one turn each.",
  models: "Model providers and which model agents use.",
  "models.default":
    'Model of agents that name none, as "<provider>/<model>"; the provider must be configured (or be the built-in "scripted"). Unset everywhere: the scripted demo model "scripted/demo" answers and says so.',
  "models.providers":
    'Configured providers by name; a model reference\'s first part names one of these. "scripted" needs no entry: without one it is the built-in scripted provider with the demo rules.',
  "models.providers.<provider>.kind":
    "openai: any OpenAI-compatible Chat Completions API. anthropic: the Messages API. scripted: fixed rules, no AI.",
  "models.providers.<provider>.baseUrl": "API base URL (Ollama, vLLM, LM Studio, OpenRouter, a proxy).",
  "models.providers.<provider>.apiKey": "API key; use ${VAR}.",
  "models.providers.<provider>.headers": "Extra HTTP headers sent with every request.",
  "models.providers.<provider>.models": "Per-model facts, by model name without the provider.",
  "models.providers.<provider>.models.<model>.contextTokens": "Context window in tokens.",
  "models.providers.<provider>.models.<model>.maxOutputTokens": "Largest reply in tokens.",
  "models.providers.<provider>.models.<model>.price.inputPerMTok": "USD per million input tokens.",
  "models.providers.<provider>.models.<model>.price.outputPerMTok": "USD per million output tokens.",
  "models.providers.<provider>.models.<model>.price.cacheReadPerMTok":
    "USD per million cached input tokens read.",
  "models.providers.<provider>.models.<model>.price.cacheWritePerMTok":
    "USD per million cached input tokens written.",
  "models.providers.<provider>.timeoutMs": "Timeout of one model request.",
  "models.providers.<provider>.maxRetries":
    "Retries of a failed model request made directly (doctor's ping); turns, compaction and sub-agents go through the failover chain, which makes one attempt per model and decides itself (models.failover).",
  "models.fallbacks":
    "Models tried in order when an agent's model fails with a failover class (rate_limited, overloaded, server, timeout, connection, empty, auth, billing); an agent's model: { primary, fallbacks } replaces them. Each must name a configured provider and fit models.allowed (docs/failover.md).",
  "models.failover": "How the failover chain waits, retries and skips failing models (docs/failover.md).",
  "models.failover.maxRetryAfterMs":
    "A 429 whose retry-after is at most this is retried on the same model after that wait; a longer one moves to the next model at once.",
  "models.failover.cooldownSeconds":
    "How long a model whose circuit opened is skipped; then one call is let through (half-open) and decides.",
  "models.failover.failuresToOpen": "Consecutive failed calls that open a model's circuit.",
  "models.providers.<provider>.script":
    "Scripted provider: a JSON5 rules file; the built-in demo rules without one.",
  "models.providers.<provider>.rules": "Scripted provider: inline rules, same shape as the file.",
  "models.allowed":
    'What per-agent and per-session model overrides may name; "<provider>/*" globs allowed; empty = any configured model.',
  session: "Session keys, send policy, agent-to-agent exchanges and thread bindings.",
  "session.scope":
    "per-sender: one session per conversation. global: every conversation shares the agent's main session.",
  "session.dmScope": "How direct messages map to sessions (see docs/session-tools.md, Keys).",
  "session.identityLinks": "Canonical peer names for the same person on several channels.",
  "session.sendPolicy.rules":
    "Rules matching channel, chatType and keyPrefix; a matching deny beats any allow.",
  "session.sendPolicy.rules[].action": "allow or deny delivery into matching sessions.",
  "session.sendPolicy.default": "What applies when no rule matches.",
  "session.agentToAgent.maxPingPongTurns": "Reply-back turns after a sessions_send.",
  "session.threadBindings.enabled": "Let sub-agents spawned with thread: true own a chat thread.",
  "session.threadBindings.idleHours": "Unbind a thread after this many idle hours (0 = never).",
  "session.threadBindings.maxAgeHours": "Unbind a thread after this many hours in total (0 = never).",
  tools: "Which tools agents get and what the session tools may see.",
  "tools.profile":
    "Base tool set. minimal: session_status; messaging: sessions_list, sessions_history, sessions_send, session_status; coding and full: every session tool and cron.",
  "tools.alsoAllow": "Tools added to the profile.",
  "tools.deny": "Tools removed (deny wins).",
  "tools.sessions.visibility": "Which sessions the session tools see: self, tree (own spawns), agent or all.",
  "tools.subagents.tools.allow":
    "Empty: no restriction; else sub-agents keep only the tools matched (globs allowed). It never gives back a tool sub-agents or leaves lose by default (deny wins).",
  "tools.subagents.tools.deny": "Tools sub-agents may not use.",
  "tools.sessions_spawn.attachments.enabled": "Allow files to be passed to sub-agents.",
  "tools.sessions_spawn.attachments.maxFiles": "Most files per spawn.",
  "tools.sessions_spawn.attachments.maxFileBytes": "Largest file in bytes.",
  "tools.sessions_spawn.attachments.maxTotalBytes": "Largest total in bytes.",
  "tools.agentToAgent.enabled": "Let session tools reach other agents' sessions (with visibility all).",
  "tools.agentToAgent.allow": "Agent ids (globs) that may reach each other; empty = all.",
  "tools.approvals":
    "Approval before a tool call (docs/approvals.md): allow, ask (the run waits for an approver) or deny.",
  "tools.approvals.default":
    "auto: MCP tools marked readOnlyHint run, other MCP tools ask, the session tools run; or allow / ask / deny for every tool no rule matches.",
  "tools.approvals.rules":
    "First match wins: { tool (glob), action: allow|ask|deny, args?: { name: glob } }.",
  "tools.approvals.approvers":
    'Who may decide: "owners" (channels.<name>.owners), "requester" (the chat\'s sender, and owners), or a list like ["telegram:111"].',
  "tools.approvals.timeoutSeconds": "An unanswered request is denied after this long (reason timeout).",
  agents: "The agents and their defaults.",
  "agents.defaults.model": "Model of agents that name none (before models.default).",
  "agents.defaults.maxToolSteps": "Most model calls in one turn.",
  "agents.defaults.contextBudgetRatio": "Share of the model's context window the transcript may fill.",
  "agents.defaults.subagents.archiveAfterMinutes": "Archive a finished sub-agent after this long.",
  "agents.defaults.subagents.runTimeoutSeconds": "Abort a sub-agent run after this long (0 = no limit).",
  "agents.defaults.subagents.maxSpawnDepth": "How deep sub-agents may spawn sub-agents.",
  "agents.defaults.subagents.maxChildren": "Unfinished children one session may have.",
  "agents.defaults.sandbox.mode": "off, or all: every session is sandboxed.",
  "agents.defaults.sandbox.sessionToolsVisibility": "spawned: sandboxed sessions see at most their own tree.",
  "agents.list": "The agents; the first one is the default.",
  "agents.list[].id": "Agent id, part of every session key.",
  "agents.list[].name": "Display name.",
  "agents.list[].model.primary": "The agent's model, tried first.",
  "agents.list[].model.fallbacks": "The agent's fallback models, tried in order when the primary fails.",
  "agents.list[].model":
    'Model as "<provider>/<model>", or { primary, fallbacks }: the agent\'s own failover chain (replacing models.fallbacks). Every provider must be configured.',
  "agents.list[].systemPrompt": "System prompt.",
  "agents.list[].workspace": "Working directory of the agent (sub-agent attachments land below it).",
  "agents.list[].mcp":
    "Names in mcp.servers whose tools this agent may use (default none); each tool is <server>__<tool>.",
  "agents.list[].subagents.allowAgents": 'Other agents this one may spawn; ["*"] = any.',
  bindings:
    "Which agent answers which chat: exact peer, then thread parent, account, channel, else the first agent.",
  "bindings[].agentId": "The agent.",
  "bindings[].match.channel": "Channel name (telegram, slack, discord, whatsapp, webchat).",
  "bindings[].match.accountId": "Account id under channels.<name>.accounts.",
  "bindings[].match.peer": "One chat: its kind and id.",
  channels: "Chat platforms. Each has one or more accounts; the account id flows into session keys.",
  "channels.telegram.accounts.<account>.token": "Bot token from @BotFather; use ${VAR}.",
  "channels.telegram.accounts.<account>.apiRoot": "Bot API base URL (a proxy or a local Bot API server).",
  "channels.telegram.accounts.<account>.mode": "polling (no public URL needed) or webhook.",
  "channels.telegram.accounts.<account>.webhookSecret": "Secret token Telegram sends with each webhook call.",
  "channels.telegram.accounts.<account>.webhookUrl": "Public URL of POST /hooks/telegram/<account>.",
  "channels.slack.accounts.<account>.botToken": "Bot token (xoxb-…).",
  "channels.slack.accounts.<account>.appToken": "App-level token (xapp-…) for socket mode.",
  "channels.slack.accounts.<account>.signingSecret": "Signing secret for HTTP mode.",
  "channels.slack.accounts.<account>.mode": "socket (no public URL needed) or http.",
  "channels.slack.accounts.<account>.apiUrl": "Web API base URL (a proxy).",
  "channels.discord.accounts.<account>.token": "Bot token; enable the Message Content intent.",
  "channels.discord.accounts.<account>.apiUrl": "REST API base URL (a proxy).",
  "channels.discord.accounts.<account>.gatewayUrl": "Gateway WebSocket URL (a proxy).",
  "channels.discord.threadBindings.enabled":
    "Overrides session.threadBindings.enabled for Discord (thread: true spawns and bound threads).",
  "channels.discord.threadBindings.idleHours": "Overrides session.threadBindings.idleHours for Discord.",
  "channels.discord.threadBindings.maxAgeHours": "Overrides session.threadBindings.maxAgeHours for Discord.",
  "channels.whatsapp.accounts.<account>.authDir":
    "Where the link credentials are kept; default stateDir/whatsapp/<account>.",
  "channels.webchat.enabled": "Serve the web chat at / on the gateway port.",
  mcp: "MCP servers whose tools agents may use (docs/tools.md).",
  "mcp.servers":
    "By name (letters, digits, '-', single '_'): a command over stdio, or a Streamable HTTP url.",
  "mcp.servers.<name>.command":
    "stdio: the program to run, started on first use in its own process group (stopped with the gateway).",
  "mcp.servers.<name>.args": "stdio: its arguments.",
  "mcp.servers.<name>.env":
    "stdio: environment added to a minimal inherited one (HOME, PATH, SHELL, TERM, USER, LOGNAME); use ${VAR} for secrets.",
  "mcp.servers.<name>.cwd": "stdio: working directory; null: the gateway's.",
  "mcp.servers.<name>.url": "Streamable HTTP: the server's endpoint.",
  "mcp.servers.<name>.headers": "Streamable HTTP: headers sent with every request (e.g. Authorization).",
  "mcp.servers.<name>.timeoutSeconds":
    "A tool call must answer within this (waiting for a restart included); later is a tool error for the model.",
  "mcp.servers.<name>.startTimeoutSeconds":
    "A start (spawn or connect, initialize, list the tools) must be done within this; npx may download first.",
  "mcp.servers.<name>.maxResultChars":
    "Text of one tool result the model sees; longer is cut, and the cut is said.",
};

for (const ch of ["telegram", "slack", "discord", "whatsapp"]) {
  CONFIG_DESCRIPTIONS[`channels.${ch}.allowFrom`] ??=
    'Senders let in without pairing: sender ids, "<channel>:<id>", or "*" for everyone.';
  CONFIG_DESCRIPTIONS[`channels.${ch}.dmPolicy`] ??=
    "Unknown DM senders: pairing (a one-time code the owner approves), allowlist, open (everyone) or disabled.";
  CONFIG_DESCRIPTIONS[`channels.${ch}.owners`] ??= "Sender ids that may use owner commands (/send, /status).";
  CONFIG_DESCRIPTIONS[`channels.${ch}.groups.requireMention`] ??=
    "In groups, answer only when mentioned or replied to.";
  CONFIG_DESCRIPTIONS[`channels.${ch}.groups.mentionPatterns`] ??= "Extra regexes that count as a mention.";
  CONFIG_DESCRIPTIONS[`channels.${ch}.mediaMaxMb`] ??=
    "Largest photo, voice note or file taken from this channel, MB; larger ones are not downloaded (a too_large note).";
}

// Long conversations (docs/sessions-and-memory.md): pruning, compaction, resets, session commands.
const CONTEXT_DESCRIPTIONS: Record<string, string> = {
  "agents.defaults.contextPruning":
    "Shrink old tool results in what the model is sent (the transcript is untouched).",
  "agents.defaults.contextPruning.mode":
    "off; always (every call); cache-ttl (only once the last model call is older than ttl).",
  "agents.defaults.contextPruning.ttl": 'cache-ttl: the provider prompt cache lifetime, e.g. "5m".',
  "agents.defaults.contextPruning.keepLastAssistants":
    "Tool results of the newest N assistant messages are never pruned.",
  "agents.defaults.contextPruning.softTrim.maxChars":
    "Older results longer than this keep only head and tail.",
  "agents.defaults.contextPruning.hardClearRatio":
    "Past this share of the context window, the oldest prunable results become the placeholder.",
  "agents.defaults.contextPruning.tools.allow":
    "Tools whose results may be pruned (* wildcards); empty = all.",
  "agents.defaults.contextPruning.tools.deny": "Tools whose results are never pruned (wins over allow).",
  "agents.defaults.compaction": "Summarise the older part of a long session into the transcript.",
  "agents.defaults.compaction.threshold": "Compact when the prompt passes this share of the context window.",
  "agents.defaults.compaction.model": "Model for the summary (provider/model); null = the session's model.",
  "agents.defaults.compaction.keepLastTurns": "The newest N user turns stay verbatim.",
  "session.reset": "Start a new session (new sessionId, old transcript kept) daily or after idle time.",
  "session.reset.mode": "off; daily (at atHour, host time); idle (after idleMinutes without a message).",
  "session.reset.byChatType": "Overrides for direct chats and groups (unset fields inherit).",
  "session.reset.byChannel": "Overrides per channel; win over byChatType.",
  usage: "Spending limits (docs/budgets.md).",
  "usage.budgets":
    "Budgets by scope and period; a spent block budget refuses new turns of its scope with BUDGET_EXCEEDED, and every model call reserves its expected cost first (both queue drivers; on bullmq the accounts are in Redis).",
  "usage.budgets[].scope":
    'What the budget counts: "global", "agent:<id>", "session:<key>" or "channel:<name>"; one that matches nothing is a start-up error.',
  "usage.budgets[].period": "Calendar period (UTC) the spend is counted over.",
  "usage.budgets[].maxCostUsd":
    "Cost limit in USD, priced from models.providers.<p>.models.<m>.price; null: none.",
  "usage.budgets[].maxTokens": "Token limit (input + output); null: none.",
  "usage.budgets[].warnAt":
    "Share of the limit at which the chat of the turn that reached it and the owners get one notice per period.",
  "usage.budgets[].action": "block: refuse new turns once spent; warn: count only.",
};
for (const [k, v] of Object.entries(CONTEXT_DESCRIPTIONS)) CONFIG_DESCRIPTIONS[k] ??= v;
for (const ch of ["telegram", "slack", "discord", "whatsapp"]) {
  CONFIG_DESCRIPTIONS[`channels.${ch}.commands.reset`] ??= "Who may use /new and /reset: all, owners or off.";
  CONFIG_DESCRIPTIONS[`channels.${ch}.commands.compact`] ??= "Who may use /compact: all, owners or off.";
}

// How a turn in progress shows in each chat (streaming previews, typing, the failure line).
for (const ch of ["telegram", "slack", "discord", "whatsapp", "webchat"]) {
  CONFIG_DESCRIPTIONS[`channels.${ch}.streaming`] ??=
    "partial: edit one preview message as the reply streams; final: post the finished reply once; off: the model does not stream.";
  CONFIG_DESCRIPTIONS[`channels.${ch}.typing`] ??= "Show the typing indicator while a turn runs.";
  CONFIG_DESCRIPTIONS[`channels.${ch}.failureText`] ??=
    "The short line a failed turn posts to the chat (the cause goes to the log and dashboard).";
}
