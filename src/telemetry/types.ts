/** Types shared by the tracing facade (trace.ts) and its OpenTelemetry side (otel.ts). */

/** Where and how to export; `endpoint` is the collector's base URL. */
export interface TracingConfig {
  endpoint: string;
  headers: Record<string, string>;
  serviceName: string;
}

export type SpanAttributes = Record<string, string | number | boolean>;

export interface SpanOptions {
  /** W3C traceparent of the parent span; without one the span is a root (there is no "active" span). */
  parent?: string | undefined;
  /** W3C traceparents of spans this one follows from. */
  links?: string[];
  attributes?: SpanAttributes;
}

/** The OpenTelemetry side (src/telemetry/otel.ts), present only while tracing is on. */
export interface Tracing {
  /** A span around `fn`, which gets the span's traceparent to pass down. */
  span<T>(
    name: string,
    sessionKey: string,
    fn: (span: string | undefined) => Promise<T>,
    opts?: SpanOptions,
  ): Promise<T>;
  /** Starts and ends the root span of an accepted turn; its traceparent, for the job. */
  enqueue(sessionKey: string, attributes: SpanAttributes, link?: string): string | undefined;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}
