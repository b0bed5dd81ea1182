import type { Command } from "commander";
import { SwitchboardError } from "../../errors.js";
import {
  type CliContext,
  type ClientOpts,
  configOpt,
  jsonOpt,
  loadReadOnly,
  numberFlag,
  readCall,
  tokenOpt,
  urlOpt,
} from "../context.js";
import { isoTime, shownKey, table } from "../format.js";

/** The session kinds `--kinds` accepts (SEMANTICS §1). */
export const KINDS = ["main", "group", "cron", "hook", "node", "other"] as const;

export function parseKinds(raw: string): string[] {
  const kinds = raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = kinds.filter((k) => !(KINDS as readonly string[]).includes(k));
  if (unknown.length > 0 || kinds.length === 0)
    throw new SwitchboardError(
      "INVALID_PARAMS",
      `--kinds: unknown kind${unknown.length === 1 ? "" : "s"} ${unknown.map((k) => `"${k}"`).join(", ") || "(empty)"}; valid kinds are ${KINDS.join(", ")}`,
    );
  return kinds;
}

/** The agent whose `main` the operator's `main` names (the first configured agent). */
function defaultAgent(opts: ClientOpts): string {
  try {
    return loadReadOnly(opts.config).config.agents.list[0]?.id ?? "main";
  } catch {
    return "main";
  }
}

type Row = Record<string, unknown>;
interface HistoryMessage {
  role: string;
  content: unknown;
  timestamp: number;
  toolName?: string;
  toolCallId?: string;
}

function messageText(m: HistoryMessage): string {
  if (typeof m.content === "string") return m.content;
  if (Array.isArray(m.content)) {
    const parts = m.content.map((p) => {
      if (p && typeof p === "object") {
        const o = p as Record<string, unknown>;
        if (typeof o.text === "string") return o.text;
        if (o.type === "toolCall" || o.type === "tool_use" || typeof o.name === "string")
          return `${String(o.name ?? "tool")}(${JSON.stringify(o.arguments ?? o.args ?? o.input ?? {})})`;
      }
      return JSON.stringify(p);
    });
    return parts.join(" ");
  }
  if (m.content && typeof m.content === "object" && "arguments" in m.content)
    return JSON.stringify((m.content as { arguments: unknown }).arguments);
  return JSON.stringify(m.content);
}

export function registerSessions(program: Command, { io }: CliContext): void {
  const sessions = program
    .command("sessions")
    .description("inspect sessions (the running gateway, else the local store)");
  sessions
    .command("list")
    .description("list sessions, newest first")
    .option("--kinds <kinds>", `comma-separated kinds: ${KINDS.join(",")}`)
    .option("--limit <n>", "at most N rows (1..200, default 50)")
    .option("--active <minutes>", "only sessions updated within this many minutes")
    .addOption(jsonOpt())
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (opts) => {
      const params: Record<string, unknown> = {};
      if (opts.kinds !== undefined) params.kinds = parseKinds(String(opts.kinds));
      if (opts.limit !== undefined)
        params.limit = numberFlag("--limit", opts.limit, { min: 1, max: 200, integer: true });
      if (opts.active !== undefined)
        params.activeMinutes = numberFlag("--active", opts.active, { positive: true });
      const res = await readCall<{ sessions: Row[] }>(opts, "sessions.list", params, io);
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      if (res.sessions.length === 0) return io.out("no sessions");
      const agent = defaultAgent(opts);
      io.out(
        table(
          ["UPDATED", "KIND", "CHANNEL", "KEY", "LABEL"],
          res.sessions.map((s) => [
            isoTime(s.updatedAt),
            String(s.kind ?? ""),
            String(s.channel ?? ""),
            shownKey(String(s.key), agent),
            typeof s.label === "string" ? s.label : "",
          ]),
        ),
      );
    });
  sessions
    .command("history <key>")
    .description("print one session's transcript (sanitised view)")
    .option("--limit <n>", "last N messages (default 50, max 500)")
    .option("--tools", "include tool calls and results, with the tool's name")
    .addOption(jsonOpt())
    .addOption(urlOpt())
    .addOption(tokenOpt())
    .addOption(configOpt())
    .action(async (key: string, opts) => {
      const params: Record<string, unknown> = { sessionKey: key };
      if (opts.limit !== undefined)
        params.limit = numberFlag("--limit", opts.limit, { min: 1, max: 500, integer: true });
      if (opts.tools) params.includeTools = true;
      const res = await readCall<{ sessionKey?: string; messages: HistoryMessage[] }>(
        opts,
        "sessions.history",
        params,
        io,
      );
      if (opts.json) return io.out(JSON.stringify(res, null, 2));
      if (res.messages.length === 0) return io.out(`no messages in ${key}`);
      for (const m of res.messages) {
        const who = m.toolName ? `${m.role} ${m.toolName}` : m.role;
        io.out(`[${isoTime(m.timestamp)}] ${who}: ${messageText(m)}`);
      }
    });
}
