/**
 * What every approval test shares: a scripted model whose `ping X` sends X to a target session
 * with `sessions_send` (and answers `done: <tool result>` after it), an `ask` rule on that tool,
 * the in-process app with the target seeded, and the lines the target was sent.
 */
import type { ChannelAdapter, InboundMessage } from "../src/channels/types.js";
import type { ConfigInput } from "../src/config/index.js";
import { handleApprovalPress } from "../src/routing/gates/approvals.js";
import { attachChannel, startTestApp, type TestApp } from "./harness.js";
import { seedSession } from "./integration/tools/seed-sessions.js";

/** The session `ping X` sends X to unless a test names another. */
export const APPROVAL_TARGET = "agent:main:target";

export interface ApprovalsConfigOptions {
  /** The session `ping X` sends X to (default APPROVAL_TARGET). */
  target?: string;
  /** The pattern of the `ping X` rule (default `^ping (.+)$`; unanchored where a mention leads). */
  match?: string;
  /** More `tools.approvals` settings beside the ask rule on `sessions_send`. */
  approvals?: Record<string, unknown>;
}

/** `models` + `tools` of an approval test's config (plain JSON: also written to a config file). */
export function approvalsConfig(opts: ApprovalsConfigOptions = {}): Pick<ConfigInput, "models" | "tools"> {
  const target = opts.target ?? APPROVAL_TARGET;
  return {
    models: {
      default: "s/x",
      providers: {
        s: {
          kind: "scripted",
          rules: [
            {
              match: opts.match ?? "^ping (.+)$",
              toolCalls: [
                { name: "sessions_send", args: { sessionKey: target, message: "$1", timeoutSeconds: 0 } },
              ],
              afterTools: "done: {{lastToolResult}}",
            },
            { match: ".*", reply: "ok" },
          ],
        },
      },
    },
    tools: {
      sessions: { visibility: "agent" },
      approvals: { rules: [{ tool: "sessions_send", action: "ask" }], ...opts.approvals },
    } as ConfigInput["tools"],
  };
}

/**
 * `startTestApp` on `approvalsConfig(opts)` plus `extra` (channels, …), with the target session
 * seeded so `sessions_send` finds it.
 */
export async function startApprovalsApp(
  extra: Partial<ConfigInput> = {},
  opts: ApprovalsConfigOptions & { listen?: boolean } = {},
): Promise<TestApp> {
  const t = await startTestApp({ ...approvalsConfig(opts), ...extra }, { listen: opts.listen ?? false });
  await seedSession(t, opts.target ?? APPROVAL_TARGET);
  return t;
}

/**
 * `adapter` added to `t` and started as the app would: inbound goes to the router (then to
 * `handled`, when given, once the router took it), presses to the approvals gate.
 */
export function attachRouted<A extends ChannelAdapter>(
  t: TestApp,
  adapter: A,
  handled?: (msg: InboundMessage) => void,
): Promise<A> {
  const services = t.app.services;
  return attachChannel(
    t,
    adapter,
    async (msg) => {
      await t.app.router.handle(msg);
      handled?.(msg);
    },
    { onAction: (press) => handleApprovalPress(services, press) },
  );
}

type Rpc = (method: string, params: Record<string, unknown>) => Promise<{ result?: any }>;

/** The user lines in `sessionKey`'s transcript (what `sessions_send` delivered there), oldest first. */
export async function userMessages(rpc: Rpc, sessionKey = APPROVAL_TARGET): Promise<string[]> {
  const h = await rpc("sessions.history", { sessionKey, limit: 50 });
  return (h.result?.messages ?? [])
    .filter((m: { role: string }) => m.role === "user")
    .map((m: { content: unknown }) => String(m.content));
}
