import { createHash } from "node:crypto";
import type { OutboundAction } from "../channels/types.js";
import { notifyPeople, ownerRecipients, peopleRecipients, type Recipient } from "../delivery/owners.js";
import { errorMessage } from "../errors.js";
import { sendDecision } from "../policy/access.js";
import type { Services } from "../services/index.js";
import type { ToolCaller } from "../sessions/caller.js";
import { routeOf } from "../sessions/route.js";
import type { SessionEntry } from "../store/types.js";
import { approvalVerdict, type ToolTraits } from "./policy.js";
import { type ApprovalRecord, type ApprovalRoute, ApprovalStore } from "./store.js";

/**
 * The approval gate in front of one model tool call (API.md §8.3). `allow` runs it; `deny` (a
 * rule) answers `{ status: "denied", reason: "rule" }`; `ask` pauses the run: the approval is
 * stored (its id derives from the call's deterministic effect id, so a turn re-run after a crash
 * or a SIGKILL finds the same approval, pending or decided), the request is posted into the chat
 * once (outbox key `approval:<id>`) — or, where the agent may not send into that chat
 * (`session.sendPolicy`), to the approvers in direct messages instead — the run is marked
 * `waiting` and the call waits — in the job,
 * which the pipeline re-runs after a restart like any interrupted turn — until a decision or the
 * timeout. An approved call runs once (`claimRun`); its result is kept, so a re-run of the turn
 * gets the same result instead of a second call.
 */

export type ToolResultRecord = Record<string, unknown>;

export interface GateInput {
  caller: ToolCaller;
  tool: string;
  args: unknown;
  /** `<runId>:s<step>:c<j>`: the same when the turn is re-run. */
  effectId: string;
  signal: AbortSignal;
  traits: ToolTraits;
  /** `<channel>:<senderId>` whose message started the run, when a person's. */
  requester?: string;
  /** The tool call's span (telemetry/trace.ts): parent of the request's delivery spans. */
  traceparent?: string | undefined;
}

/** Between two looks at a pending approval (another process may decide it). */
const POLL_MIN_MS = 100;
const POLL_MAX_MS = 1000;
/** The longest a sub-agent's request climbs its requesters looking for a chat. */
const MAX_CHAIN = 8;
const ARGS_SHOWN = 600;

export function approvalIdFor(effectId: string): string {
  return `ap_${createHash("sha256").update(effectId).digest("hex").slice(0, 20)}`;
}

export function approvalActions(id: string): OutboundAction[] {
  return [
    { id: `ap:${id}:once`, label: "Allow once", style: "primary" },
    { id: `ap:${id}:always`, label: "Allow always", style: "success" },
    { id: `ap:${id}:deny`, label: "Deny", style: "danger" },
  ];
}

export function argsPreview(args: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(args ?? {});
  } catch {
    text = "(arguments not shown)";
  }
  return text.length > ARGS_SHOWN ? `${text.slice(0, ARGS_SHOWN)}…` : text;
}

export function requestText(rec: ApprovalRecord): string {
  const minutes = Math.max(1, Math.round((rec.expiresAt - rec.requestedAt) / 60_000));
  return [
    `Approval needed: agent ${rec.agentId} wants to run ${rec.tool}`,
    `Arguments: ${argsPreview(rec.args)}`,
    `Request ${rec.id} (expires in ${minutes} min).`,
  ].join("\n");
}

export function fallbackText(id: string): string {
  return `Reply 1 to allow once, 2 to allow always, 3 to deny (or /approve ${id} allow-once|allow-always|deny).`;
}

/** The chat a session's approval requests go to: its own, else (a sub-agent) its requesters'. */
async function chatOf(
  services: Pick<Services, "store">,
  entry: SessionEntry,
): Promise<{ entry: SessionEntry; route: ApprovalRoute } | null> {
  let e: SessionEntry | null = entry;
  for (let i = 0; e && i < MAX_CHAIN; i++) {
    const route = routeOf(e);
    if (route) return { entry: e, route: { ...route } };
    e = e.spawnedBy ? await services.store.sessions.get(e.spawnedBy) : null;
  }
  return null;
}

/** Who is told privately of a request its chat may not get: the approvers, or the owners (and the requester). */
function approverRecipients(services: Pick<Services, "config">, rec: ApprovalRecord): Recipient[] {
  const { config } = services;
  const approvers = config.tools.approvals.approvers;
  if (Array.isArray(approvers)) return peopleRecipients(config, approvers);
  const owners = ownerRecipients(config);
  return approvers === "requester" && rec.requester
    ? [...owners, ...peopleRecipients(config, [rec.requester])]
    : owners;
}

/** The request as the approvers get it in a direct message: why not in the chat, and how to decide. */
function withheldText(rec: ApprovalRecord): string {
  return [
    requestText(rec),
    `Not posted in its chat (${rec.chatSessionKey}): the agent may not send there (${rec.withheld}).`,
    `Decide with /approve ${rec.id} allow-once|allow-always|deny, on the dashboard, or with switchboard approvals.`,
  ].join("\n");
}

export async function guardToolCall(
  services: Services,
  input: GateInput,
  run: () => Promise<ToolResultRecord>,
): Promise<ToolResultRecord> {
  const cfg = services.config.tools.approvals;
  const { caller, tool, args } = input;
  let verdict = approvalVerdict(cfg, tool, args, input.traits, false);
  if (verdict.action === "deny") return denied("rule", tool);
  if (verdict.action === "allow") return run();
  const store = new ApprovalStore(services.store);
  if (await store.isAlways(caller.agentId, tool)) {
    verdict = approvalVerdict(cfg, tool, args, input.traits, true);
    if (verdict.action === "allow") return run();
    if (verdict.action === "deny") return denied("rule", tool);
  }
  if (!caller.runId) return run(); // no run to pause: the operator's own tools.invoke
  const rec = await requestApproval(services, store, input, caller.runId, cfg.timeoutSeconds);
  let decided: ApprovalRecord;
  try {
    decided = await waitForDecision(services, store, rec, input.signal);
  } finally {
    if (!input.signal.aborted) await markRunning(services, rec);
  }
  if (decided.decision === "deny") return denied("denied", tool);
  if (decided.decision === "timeout" || decided.decision === undefined) return denied("timeout", tool);
  const saved = await store.result(rec.id);
  if (saved) return saved;
  if (!(await store.claimRun(rec.id))) {
    // Another attempt of this run took the call (it ran, or was cut off mid-call): never twice.
    return (
      (await store.result(rec.id)) ?? {
        status: "error",
        error: `the approved call of ${tool} was interrupted (a restart); it ran at most once and will not run again`,
      }
    );
  }
  let result: ToolResultRecord;
  try {
    result = await run();
  } catch (err) {
    result = { status: "error", error: `tool ${tool} failed: ${errorMessage(err)}` };
  }
  await store.saveResult(rec.id, result);
  return result;
}

function denied(reason: "rule" | "denied" | "timeout", tool: string): ToolResultRecord {
  const why =
    reason === "rule"
      ? "a rule in tools.approvals denies it"
      : reason === "denied"
        ? "an approver denied it"
        : "nobody approved it in time";
  return { status: "denied", reason, error: `${tool} did not run: ${why}` };
}

async function requestApproval(
  services: Services,
  store: ApprovalStore,
  input: GateInput,
  runId: string,
  timeoutSeconds: number,
): Promise<ApprovalRecord> {
  const id = approvalIdFor(input.effectId);
  // waiting before the request is visible: whoever sees the request finds the run waiting
  await markWaiting(services, { id, runId, tool: input.tool, args: input.args ?? {} });
  let rec = await store.get(id);
  if (!rec) {
    const now = services.now();
    const chat = await chatOf(services, input.caller.entry);
    // a chat the agent may not send into (session.sendPolicy) gets no request, not even this one
    const verdict = chat ? sendDecision(services, chat.entry, chat.route) : null;
    const where = !chat
      ? {}
      : verdict?.action === "deny"
        ? { chatSessionKey: chat.entry.key, withheld: `session.sendPolicy: ${verdict.reason}` }
        : { chatSessionKey: chat.entry.key, route: chat.route };
    rec = await store.create({
      id,
      sessionKey: input.caller.sessionKey,
      runId,
      agentId: input.caller.agentId,
      tool: input.tool,
      args: input.args ?? {},
      requestedAt: now,
      expiresAt: now + timeoutSeconds * 1000,
      ...where,
      ...(input.requester ? { requester: input.requester } : {}),
      status: "pending",
    });
    services.bus.emit("approval.requested", {
      id,
      sessionKey: rec.sessionKey,
      runId,
      tool: rec.tool,
    });
  }
  if (rec.status === "pending" && rec.withheld) {
    // Once per approver (outbox keys), also when a re-run after a crash comes here again.
    const told = await notifyPeople(
      services,
      rec.sessionKey,
      withheldText(rec),
      `approval:${id}:approver`,
      approverRecipients(services, rec),
      input.traceparent,
    );
    if (told === 0)
      services.logger.warn(
        { approvalId: id, sessionKey: rec.sessionKey, why: rec.withheld },
        "approval request not posted in its chat and no approver reachable; it can still be decided with approvals.resolve or the dashboard",
      );
  } else if (rec.status === "pending" && rec.route && rec.chatSessionKey) {
    // Posted once per approval (outbox key), also when a re-run after a crash comes here again;
    // under the chat's send policy like any post of the agent's
    const res = await services.delivery.deliver({
      sessionKey: rec.chatSessionKey,
      route: rec.route,
      text: requestText(rec),
      idempotencyKey: `approval:${id}`,
      actions: approvalActions(id),
      actionsFallback: fallbackText(id),
      traceparent: input.traceparent,
    });
    if (res.status === "failed" || res.status === "no-route" || res.status === "blocked")
      services.logger.warn(
        { approvalId: id, sessionKey: rec.sessionKey, why: "error" in res ? res.error : res.reason },
        "approval request not posted; it can still be decided with approvals.resolve or the dashboard",
      );
  }
  return rec;
}

async function markWaiting(
  services: Services,
  rec: Pick<ApprovalRecord, "id" | "runId" | "tool" | "args">,
): Promise<void> {
  await services.store.runs.patch(rec.runId, {
    status: "waiting",
    waitingFor: { approvalId: rec.id, tool: rec.tool, args: rec.args },
  });
}

async function markRunning(services: Services, rec: ApprovalRecord): Promise<void> {
  try {
    await services.store.runs.patch(rec.runId, { status: "running", waitingFor: undefined });
  } catch (err) {
    services.logger.warn({ err: errorMessage(err), runId: rec.runId }, "run not marked running again");
  }
}

/** Waits for the decision (or decides the timeout), bounded by the approval's expiry. */
async function waitForDecision(
  services: Services,
  store: ApprovalStore,
  rec: ApprovalRecord,
  signal: AbortSignal,
): Promise<ApprovalRecord> {
  let pollMs = POLL_MIN_MS;
  for (let look = 0; ; look++) {
    if (signal.aborted) throw signal.reason ?? new Error("aborted");
    const cur = await store.get(rec.id);
    if (!cur) return { ...rec, status: "decided", decision: "timeout" };
    if (cur.status === "decided") return cur;
    const left = cur.expiresAt - services.now();
    if (left <= 0) {
      if (await store.decide(rec.id, "timeout", "timeout", services.now())) {
        services.bus.emit("approval.resolved", {
          id: rec.id,
          sessionKey: rec.sessionKey,
          runId: rec.runId,
          tool: rec.tool,
          // API.md §8.3 names three decisions; a timeout is nobody's decision
          reason: "timeout",
        });
        await editDecided(services, { ...cur, decision: "timeout", decidedBy: "timeout" });
      }
      // someone else's decision is being written: look again shortly (bounded by the count)
      if (look > 1000) return { ...cur, status: "decided", decision: "timeout" };
      await sleepOrWake(services, rec.id, POLL_MIN_MS, signal);
      continue;
    }
    await sleepOrWake(services, rec.id, Math.min(pollMs, left), signal);
    pollMs = Math.min(POLL_MAX_MS, pollMs * 2);
  }
}

/** Sleeps `ms`, or less when this process hears the approval resolved, or the signal aborts. */
function sleepOrWake(services: Services, id: string, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      off();
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const off = services.bus.on("approval.resolved", (d) => {
      if (d.id === id) done();
    });
    signal.addEventListener("abort", done, { once: true });
  });
}

/** The decided request's message shows who decided what, without its buttons (best effort). */
export async function editDecided(
  services: Pick<Services, "store" | "delivery" | "logger">,
  rec: ApprovalRecord,
): Promise<void> {
  if (!rec.route || !services.delivery.edit) return;
  try {
    const sent = await services.store.outbox.get(`approval:${rec.id}#0`);
    const messageId = sent?.messageIds?.[0];
    if (!messageId) return;
    const what =
      rec.decision === "timeout"
        ? "Denied: nobody decided in time."
        : `${rec.decision === "deny" ? "Denied" : rec.decision === "allow-always" ? "Allowed always" : "Allowed once"} by ${rec.decidedBy ?? "someone"}.`;
    await services.delivery.edit({
      route: rec.route,
      messageId,
      text: `${requestText(rec)}\n${what}`,
      actions: [],
    });
  } catch (err) {
    services.logger.warn({ err: errorMessage(err), approvalId: rec.id }, "approval message not edited");
  }
}
