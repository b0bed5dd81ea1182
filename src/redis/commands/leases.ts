/** The Lua scripts of channel-account leases (src/app/leases.ts). */
import type { ScriptDef } from "../scripts.js";
import { acquireLease } from "./acquireLease-2.js";
import { releaseLease } from "./releaseLease-1.js";

export { acquireLease, releaseLease };

export const LEASE_SCRIPTS: readonly ScriptDef[] = [acquireLease, releaseLease];
