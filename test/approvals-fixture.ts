/**
 * What every approval test shares: a scripted model whose `ping X` sends X to a target session
 * with `sessions_send` (and answers `done: <tool result>` after it), an `ask` rule on that tool,
 * the in-process app with the target seeded, and the lines the target was sent.
 */
import type { ChannelAdapter, InboundMessage } from "../src/channels/types.js";
import type { ConfigInput } from "../src/config/index.js";
import { handleApprovalPress } from "../src/routing/gates/approvals.js";
import { attachChannel, startTestApp, startTestWorker, type TestApp } from "./harness.js";
import { REDIS_URL, randomPrefix } from "./helpers.js";
import { seedSession } from "./integration/tools/seed-sessions.js";
import { dropPrefix } from "./redis.js";

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
 * Which drivers an approval test runs on: the embedded ones (fs store, local queue), or redis +
 * bullmq with a gateway that runs no turns (`queue.runTurns: false`) and one in-process worker
 * that runs them all: the request is asked on the worker and handed to the gateway to post, the
 * press lands on the gateway, and the worker's waiting turn sees the decision through Redis.
 */
export type ApprovalsDriver = "local" | "bullmq";

/**
 * `startTestApp` on `approvalsConfig(opts)` plus `extra` (channels, …), with the target session
 * seeded so `sessions_send` finds it. On `bullmq` its `stop` also stops the worker and removes
 * the test's Redis keys (a random prefix).
 */
export async function startApprovalsApp(
  extra: Partial<ConfigInput> = {},
  opts: ApprovalsConfigOptions & { listen?: boolean; driver?: ApprovalsDriver } = {},
): Promise<TestApp> {
  const base = { ...approvalsConfig(opts), ...extra };
  if (opts.driver !== "bullmq") {
    const t = await startTestApp(base, { listen: opts.listen ?? false });
    await seedSession(t, opts.target ?? APPROVAL_TARGET);
    return t;
  }
  const prefix = randomPrefix("apbq");
  const storage = { driver: "redis" as const, redisUrl: REDIS_URL, prefix };
  const queue = { driver: "bullmq" as const, redisUrl: REDIS_URL, prefix };
  const t = await startTestApp(
    { ...base, storage, queue: { ...queue, runTurns: false } },
    { listen: opts.listen ?? false },
  );
  // the worker has the model and the approval rules, and no channels (it hands its posts over)
  const worker = await startTestWorker({ ...approvalsConfig(opts), storage, queue }).catch(async (err) => {
    await t.stop();
    throw err;
  });
  await seedSession(t, opts.target ?? APPROVAL_TARGET);
  return {
    ...t,
    async stop() {
      await worker.stop();
      await t.stop();
      await dropPrefix(prefix);
    },
  };
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

/** `channels` of an approval test on the Telegram fake: everyone may write, `owner` decides. */
export function telegramChannels(
  tg: { token: string; apiRoot: string },
  owner: number,
): ConfigInput["channels"] {
  return {
    telegram: {
      accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } },
      owners: [String(owner)],
      allowFrom: ["*"],
    },
  } as ConfigInput["channels"];
}

type Rpc = (method: string, params: Record<string, unknown>) => Promise<{ result?: any }>;

/** The user lines in `sessionKey`'s transcript (what `sessions_send` delivered there), oldest first. */
export async function userMessages(rpc: Rpc, sessionKey = APPROVAL_TARGET): Promise<string[]> {
  const h = await rpc("sessions.history", { sessionKey, limit: 50 });
  return (h.result?.messages ?? [])
    .filter((m: { role: string }) => m.role === "user")
    .map((m: { content: unknown }) => String(m.content));
}
