import { EventEmitter } from "node:events";
import type { RunRecord, SessionEntry, TranscriptMessage } from "./store/types.js";

/** Server events pushed to WebSocket clients (API.md §4) and to in-process listeners. */
export interface GatewayEvents {
  "session.updated": { entry: SessionEntry };
  "message.appended": { sessionKey: string; message: TranscriptMessage };
  "run.started": { run: RunRecord };
  "run.finished": { run: RunRecord };
  /**
   * Streamed reply text, in order; the concatenation equals the final reply. `reset: true` (with
   * empty text) marks a tool step: the text streamed before it was a preamble, and the final reply
   * is the concatenation of the deltas after the last reset.
   */
  "run.delta": { runId: string; sessionKey: string; text: string; reset?: true };
  "run.typing": { runId: string; sessionKey: string; on: boolean };
  /** A tool call waits for an approver (API.md §8.3); `approval.resolved` carries the decision. */
  "approval.requested": { id: string; sessionKey: string; runId: string; tool: string };
  "approval.resolved": {
    id: string;
    sessionKey: string;
    runId: string;
    tool: string;
    /** Absent when nobody decided: the approval ran out (`reason: "timeout"`). */
    decision?: "allow-once" | "allow-always" | "deny";
    reason?: "timeout";
  };
  /**
   * A model of the run's failover chain failed (or was skipped: circuit open) and the next is
   * tried (API.md §8.4): `model` failed with `class`; `next` is tried now (absent: none left).
   */
  "run.fallback": {
    runId: string;
    sessionKey: string;
    model: string;
    class: string;
    skipped?: true;
    next?: string;
  };
}

export type GatewayEventName = keyof GatewayEvents;

/** A typed, in-process event bus. Listeners must not throw; a throwing listener is isolated. */
export class EventBus {
  readonly #emitter = new EventEmitter();
  readonly #watchers = new Map<GatewayEventName, Set<{ wants: (sessionKey: string) => boolean }>>();

  constructor() {
    this.#emitter.setMaxListeners(0);
  }

  emit<E extends GatewayEventName>(event: E, data: GatewayEvents[E]): void {
    this.#emitter.emit(event, data);
    this.#emitter.emit("*", event, data);
  }

  /**
   * Marks `event` as wanted by someone this bus cannot see as a listener (a WebSocket client fed
   * through `onAny`, another process fed by the live relay) until the returned function is called;
   * `wants` narrows it to some sessions (default: every session).
   */
  watch(event: GatewayEventName, wants: (sessionKey: string) => boolean = () => true): () => void {
    let set = this.#watchers.get(event);
    if (!set) {
      set = new Set();
      this.#watchers.set(event, set);
    }
    const watcher = { wants };
    set.add(watcher);
    return () => {
      set.delete(watcher);
    };
  }

  /**
   * Whether anyone wants `event` for this session: a listener of its own (`on`) or a `watch`. A
   * producer may skip work no one would see: the runtime streams a model's answer only when
   * `run.delta` is watched or a channel shows the reply as it comes.
   */
  watched(event: GatewayEventName, sessionKey: string): boolean {
    if (this.#emitter.listenerCount(event) > 0) return true;
    const set = this.#watchers.get(event);
    if (set) for (const w of set) if (w.wants(sessionKey)) return true;
    return false;
  }

  on<E extends GatewayEventName>(event: E, listener: (data: GatewayEvents[E]) => void): () => void {
    const wrapped = (data: GatewayEvents[E]) => {
      try {
        listener(data);
      } catch {
        // an observer must never break the producer
      }
    };
    this.#emitter.on(event, wrapped);
    return () => this.#emitter.off(event, wrapped);
  }

  onAny(listener: (event: GatewayEventName, data: unknown) => void): () => void {
    const wrapped = (event: GatewayEventName, data: unknown) => {
      try {
        listener(event, data);
      } catch {
        // isolated
      }
    };
    this.#emitter.on("*", wrapped);
    return () => this.#emitter.off("*", wrapped);
  }
}
