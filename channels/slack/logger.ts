import { format } from "node:util";
import { LogLevel, type Logger as SlackLogger } from "@slack/bolt";
import type { Logger } from "../../src/log.js";

/**
 * Bolt, the Web API client and the Socket Mode client want @slack/logger's interface; route
 * it into our pino logger. Slack's own debug output is demoted to trace, it is very chatty.
 */
export function slackLogger(log: Logger): SlackLogger {
  let level: LogLevel = LogLevel.INFO;
  const line = (args: unknown[]): string => format(...args);
  return {
    debug: (...args: unknown[]) => log.trace(line(args)),
    info: (...args: unknown[]) => log.debug(line(args)),
    warn: (...args: unknown[]) => log.warn(line(args)),
    error: (...args: unknown[]) => log.error(line(args)),
    setLevel: (l: LogLevel) => {
      level = l;
    },
    getLevel: () => level,
    setName: () => undefined,
  };
}
