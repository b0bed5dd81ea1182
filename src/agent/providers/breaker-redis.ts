import type { Redis } from "ioredis";
import { breakerAdmit } from "../../redis/commands/breakerAdmit-2.js";
import { breakerFail } from "../../redis/commands/breakerFail-2.js";
import { ScriptRunner } from "../../redis/scripts.js";
import {
  type Admission,
  type BreakerView,
  type CircuitBreaker,
  type FailoverPolicy,
  isModelErrorClass,
  viewOf,
} from "./chain.js";
import type { ModelErrorClass } from "./failure.js";

/**
 * The failover circuit breaker in Redis (bullmq driver): every worker and gateway sees the same
 * circuits, and one caller across all of them wins a half-open probe (breakerAdmit-2's SET NX).
 *
 * A closed circuit costs no Redis command per call: a process remembers what it last read for
 * `freshMs` (default 1 s) and asks Redis again only after that, after a failure, or while the
 * circuit is not plainly closed. A success resets a circuit only when some failure is known (or
 * the memory is stale). So another worker's opening is seen here within `freshMs`.
 */

interface Known {
  view: BreakerView;
  readAt: number;
}

export class RedisBreaker implements CircuitBreaker {
  readonly #scripts: ScriptRunner;
  readonly #known = new Map<string, Known>();

  constructor(
    private readonly client: Redis,
    private readonly prefix: string,
    private readonly policy: FailoverPolicy,
    private readonly now: () => number = Date.now,
    private readonly freshMs = 1000,
  ) {
    this.#scripts = new ScriptRunner(client, "failover breaker");
  }

  #keys(ref: string): [string, string] {
    // one hash tag per model: both keys in one cluster slot
    const base = `${this.prefix}:cb:{${ref}}`;
    return [base, `${base}:probe`];
  }

  #remember(ref: string, view: BreakerView): void {
    if (this.#known.size > 1000) this.#known.clear();
    this.#known.set(ref, { view, readAt: this.now() });
  }

  async admit(ref: string): Promise<Admission> {
    const now = this.now();
    const k = this.#known.get(ref);
    if (k && k.view.state === "closed" && now - k.readAt < this.freshMs) return GO;
    const cooldownMs = this.policy.cooldownSeconds * 1000;
    const r = (await this.#scripts.run(breakerAdmit, this.#keys(ref), [now, Math.max(1, cooldownMs)])) as [
      number,
      number,
      number,
      string,
    ];
    const [verdict, failures, openUntil, last] = r;
    const lastClass: ModelErrorClass = isModelErrorClass(last) ? last : "server";
    this.#remember(
      ref,
      viewOf(Number(failures), Number(openUntil), isModelErrorClass(last) ? last : undefined, now),
    );
    if (verdict === 0) return GO;
    if (verdict === 2) return PROBE;
    const until = Number(openUntil) > now ? Number(openUntil) : now + cooldownMs;
    return { go: false, lastClass, until };
  }

  async success(ref: string): Promise<void> {
    const k = this.#known.get(ref);
    if (k && k.view.failures === 0 && k.view.state === "closed" && this.now() - k.readAt < this.freshMs)
      return;
    await this.client.del(...this.#keys(ref));
    this.#remember(ref, { state: "closed", failures: 0 });
  }

  async failure(ref: string, cls: ModelErrorClass, probe: boolean): Promise<void> {
    const now = this.now();
    const cooldownMs = this.policy.cooldownSeconds * 1000;
    const keep = Math.max(cooldownMs * 2, 3_600_000);
    const [failures, openUntil] = (await this.#scripts.run(breakerFail, this.#keys(ref), [
      now,
      this.policy.failuresToOpen,
      cooldownMs,
      cls,
      probe ? 1 : 0,
      keep,
    ])) as [number, number];
    this.#remember(ref, viewOf(Number(failures), Number(openUntil), cls, now));
  }

  async snapshot(refs: readonly string[]): Promise<Record<string, BreakerView>> {
    const now = this.now();
    const pipe = this.client.pipeline();
    for (const ref of refs) pipe.hmget(this.#keys(ref)[0], "failures", "openUntil", "lastClass");
    const res = (await pipe.exec()) ?? [];
    const out: Record<string, BreakerView> = {};
    refs.forEach((ref, i) => {
      const [err, v] = res[i] ?? [null, null];
      const [f, o, c] = !err && Array.isArray(v) ? (v as Array<string | null>) : [null, null, null];
      out[ref] = viewOf(Number(f ?? 0), Number(o ?? 0), isModelErrorClass(c) ? c : undefined, now);
    });
    return out;
  }
}

const GO: Admission = { go: true, probe: false };
const PROBE: Admission = { go: true, probe: true };
