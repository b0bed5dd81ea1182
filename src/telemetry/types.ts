/** Types shared by the tracing facade (trace.ts) and its OpenTelemetry side (otel.ts). */

/** Where and how to export; `endpoint` is the collector's base URL. */
export interface TracingConfig {
  endpoint: string;
  headers: Record<string, string>;
  serviceName: string;
}

export type SpanAttributes = Record<string, string | number | boolean>;

export interface SpanOptions {
  /** W3C traceparent of the parent span (another process's, read from a job). */
  parent?: string;
  /** W3C traceparents of spans this one follows from. */
  links?: string[];
  attributes?: SpanAttributes;
}

/** The OpenTelemetry side (src/telemetry/otel.ts), present only while tracing is on. */
export interface Tracing {
  span<T>(name: string, sessionKey: string, fn: () => Promise<T>, opts?: SpanOptions): Promise<T>;
  /** Starts and ends the root span of an accepted turn; its traceparent, for the job. */
  enqueue(sessionKey: string, attributes: SpanAttributes, link?: string): string | undefined;
  /** The active span's traceparent. */
  active(): string | undefined;
  /** Runs `fn` with `traceparent` as the active (non-recording) span: what it submits links to it. */
  within<T>(traceparent: string, fn: () => Promise<T>): Promise<T>;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}
