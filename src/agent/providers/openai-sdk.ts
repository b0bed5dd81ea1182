import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import type { Logger } from "../../log.js";
import { connectionReason, type Failure, sdkLogger } from "./failure.js";
import { nodeFetch } from "./node-fetch.js";

/**
 * The official OpenAI SDK, for what the lean call (openai-http.ts) does not do: `ping` lists
 * models through it. Imported only by `ping`: the SDK is ~150 modules, and a gateway that only
 * completes never loads them.
 */

export interface OpenAIClientOptions {
  /** Never empty: the SDK refuses to start without a key (the provider sends a placeholder). */
  apiKey: string;
  baseUrl: string;
  headers?: Record<string, string> | undefined;
  timeoutMs: number;
}

export function createOpenAIClient(o: OpenAIClientOptions, log: Logger): OpenAI {
  // Every option the SDK would otherwise read from OPENAI_* variables is given explicitly.
  return new OpenAI({
    apiKey: o.apiKey,
    baseURL: o.baseUrl,
    organization: null,
    project: null,
    webhookSecret: null,
    ...(o.headers ? { defaultHeaders: o.headers } : {}),
    maxRetries: 0,
    // Our per-attempt timer (withTimeout) is the one that fires; the SDK's is only a backstop.
    timeout: o.timeoutMs + 1000,
    logger: sdkLogger(log, "openai"),
    logLevel: "warn",
    fetch: nodeFetch,
  });
}

/** Turns an error the SDK raised into a Failure; undefined for anything else (and for an abort). */
export function describeSdkError(err: unknown): Failure | undefined {
  if (err instanceof APIConnectionTimeoutError) return { kind: "timeout" };
  if (err instanceof APIUserAbortError) return undefined;
  if (err instanceof APIConnectionError) return { kind: "connection", message: connectionReason(err) };
  if (err instanceof APIError) {
    const body = err.error as { message?: unknown } | undefined;
    const message = typeof body?.message === "string" ? body.message : err.message;
    // A status-less APIError is an `error` event inside a stream: the server failed mid-answer.
    return { kind: "status", status: err.status ?? 500, message, headers: err.headers };
  }
  return undefined;
}
