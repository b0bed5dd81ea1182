import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import { SwitchboardError } from "../errors.js";

/** One Lua script (a file in `commands/`, named `<operation>-<number of keys>`, BullMQ-style). */
export interface ScriptDef {
  name: string;
  numberOfKeys: number;
  lua: string;
}

type Arg = string | number;

/**
 * The one Lua script runner, used by the redis store and the bullmq pipeline: runs scripts by SHA
 * (EVALSHA), optionally loaded up front; a server that lost its script cache (restart, SCRIPT
 * FLUSH, failover) gets the source again through EVAL, which also re-caches it. Uses no
 * `defineCommand`, so the shared client is left unmodified. `owner` names the user in errors.
 */
export class ScriptRunner {
  private readonly shas = new Map<ScriptDef, string>();

  constructor(
    private readonly client: Redis,
    private readonly owner = "redis store",
  ) {}

  /** SCRIPT LOAD every script in one round trip. */
  async load(defs: readonly ScriptDef[]): Promise<void> {
    const pipe = this.client.pipeline();
    for (const d of defs) pipe.script("LOAD", d.lua);
    const res = (await pipe.exec()) ?? [];
    defs.forEach((d, i) => {
      const [err, sha] = res[i] ?? [new Error("no reply")];
      if (err)
        throw new SwitchboardError("UNAVAILABLE", `${this.owner}: loading script ${d.name} failed`, {
          cause: err,
        });
      if (sha !== this.sha(d)) {
        throw new SwitchboardError(
          "INTERNAL",
          `${this.owner}: script ${d.name} loaded with unexpected sha ${String(sha)}`,
        );
      }
    });
  }

  async run(def: ScriptDef, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    if (keys.length !== def.numberOfKeys) {
      throw new SwitchboardError(
        "INTERNAL",
        `${this.owner}: ${def.name} takes ${def.numberOfKeys} keys, got ${keys.length}`,
      );
    }
    try {
      return await this.client.evalsha(this.sha(def), def.numberOfKeys, ...keys, ...args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return this.client.eval(def.lua, def.numberOfKeys, ...keys, ...args);
    }
  }

  sha(def: ScriptDef): string {
    let sha = this.shas.get(def);
    if (sha === undefined) {
      sha = createHash("sha1").update(def.lua).digest("hex");
      this.shas.set(def, sha);
    }
    return sha;
  }
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith("NOSCRIPT");
}
