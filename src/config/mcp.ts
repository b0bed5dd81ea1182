import { z } from "zod";

/**
 * `mcp.servers` (API.md §8.3): the MCP servers agents may use as tools, by name. A server is either
 * a command run over stdio (`command`, `args`, `env`, `cwd`) or a Streamable HTTP endpoint (`url`,
 * `headers`); `agents.list[].mcp` names the servers an agent may use.
 */

/** A server's name is the first half of its tools' names (`<server>__<tool>`): no `__` inside. */
export const mcpServerName = z
  .string()
  .regex(
    /^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$/,
    "an MCP server name is letters, digits, '-' and single '_' (tools are named <server>__<tool>)",
  )
  .max(32);

export const mcpServerSchema = z
  .strictObject({
    /** stdio: the program to run (its own process group; stopped with it). */
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    /** stdio: added to a minimal inherited environment (HOME, PATH, SHELL, TERM, USER, LOGNAME). */
    env: z.record(z.string(), z.string()).default({}),
    /** stdio: working directory (relative to the config file); null: the gateway's. */
    cwd: z.string().min(1).nullable().default(null),
    /** Streamable HTTP: the endpoint. */
    url: z.url({ protocol: /^https?$/ }).optional(),
    /** Streamable HTTP: sent with every request (e.g. Authorization). */
    headers: z.record(z.string(), z.string()).default({}),
    /** One tool call must answer within this (a call to a server still starting waits for it within it too). */
    timeoutSeconds: z.number().positive().max(3600).default(60),
    /** A start (spawn or connect, initialize, list tools) must be done within this. */
    startTimeoutSeconds: z.number().positive().max(3600).default(60),
    /** Text of one result the model sees, at most; longer is cut, and the cut is said. */
    maxResultChars: z.number().int().min(1000).max(10_000_000).default(50_000),
  })
  .superRefine((s, ctx) => {
    if ((s.command === undefined) === (s.url === undefined))
      ctx.addIssue({
        code: "custom",
        message: "set either command (stdio) or url (Streamable HTTP)",
        path: s.command === undefined ? ["command"] : ["url"],
      });
    if (s.url !== undefined && (s.args.length > 0 || Object.keys(s.env).length > 0 || s.cwd !== null))
      ctx.addIssue({
        code: "custom",
        message: "args, env and cwd are for stdio servers (command)",
        path: ["url"],
      });
    if (s.command !== undefined && Object.keys(s.headers).length > 0)
      ctx.addIssue({
        code: "custom",
        message: "headers are for Streamable HTTP servers (url)",
        path: ["headers"],
      });
  });

export const mcpSchema = z
  .strictObject({ servers: z.record(mcpServerName, mcpServerSchema).default({}) })
  .default({ servers: {} });

export type McpServerConfig = z.infer<typeof mcpServerSchema>;
export type McpConfig = z.infer<typeof mcpSchema>;
