import { z } from "zod";
import type { ToolRegistry } from "../../agent/tool-registry.js";
import { SwitchboardError } from "../../errors.js";
import type { Services } from "../../services/index.js";
import { callerOf } from "../../sessions/service.js";
import { method, type RpcDispatcher } from "../rpc.js";
import { requireSession } from "./common.js";

/** `tools.list` and `tools.invoke` (API.md §4): the tools as the session's caller sees them. */
export function registerToolMethods(rpc: RpcDispatcher, services: Services, tools: ToolRegistry): void {
  rpc.register(
    "tools.list",
    method(z.strictObject({ sessionKey: z.string().min(1) }), async (p) => {
      const entry = await requireSession(services, p.sessionKey);
      const caller = callerOf(services, entry);
      await tools.prepare(caller);
      return { sessionKey: entry.key, ...tools.report(services, caller) };
    }),
  );

  rpc.register(
    "tools.invoke",
    method(
      z.strictObject({
        sessionKey: z.string().min(1),
        tool: z.string().min(1),
        args: z.record(z.string(), z.unknown()).default({}),
      }),
      async (p) => {
        const entry = await requireSession(services, p.sessionKey);
        // A tools.invoke call is not part of any turn: another turn running in the lane is not
        // the caller's own (a self-send waits behind it like any other send).
        const caller = callerOf(services, entry);
        const out = await tools.invoke(p.tool, p.args, {
          services,
          caller,
          signal: new AbortController().signal,
        });
        if (!out.ok) throw new SwitchboardError(out.code, out.message, { details: { tool: p.tool } });
        return out.result;
      },
    ),
  );
}
