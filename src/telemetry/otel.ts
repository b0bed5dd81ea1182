import {
  type Context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { errorClass } from "./metrics.js";
import type { SpanAttributes, SpanOptions, Tracing, TracingConfig } from "./types.js";

/**
 * The OpenTelemetry side of tracing, imported only when `telemetry.otlp.endpoint` is set (see
 * trace.ts). Manual spans through the official SDK (no auto-instrumentation), exported in batches
 * over OTLP/HTTP to `<endpoint>/v1/traces`.
 *
 * No context manager and no global registration: the provider's tracer is used directly, and every
 * span's parent is given as an explicit context extracted from a W3C traceparent (trace.ts: "a
 * span is a traceparent you pass down"). The SDK's AsyncLocalStorage context manager would enable
 * async_hooks for the whole process, an init hook on every promise (~0.1 ms CPU per turn on Node
 * 20/22). So nothing is "active": `@opentelemetry/api`'s global tracer stays the no-op one, no
 * trace header is ever sent to a model provider or a chat platform (no global propagator either),
 * and @anthropic-ai/sdk, which records spans only through the global API, records none. Error
 * spans carry the error class only (never the message, which may quote user text).
 */

const W3C = new W3CTraceContextPropagator();
const getter: TextMapGetter<Record<string, string>> = {
  keys: (c) => Object.keys(c),
  get: (c, k) => c[k],
};
const setter: TextMapSetter<Record<string, string>> = {
  set: (c, k, v) => {
    c[k] = v;
  },
};

/** The context whose span is the one `traceparent` names (ROOT_CONTEXT when it names none). */
function extract(traceparent: string): Context {
  return W3C.extract(ROOT_CONTEXT, { traceparent }, getter);
}

function traceparentOf(span: Span): string | undefined {
  const carrier: Record<string, string> = {};
  W3C.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, setter);
  return carrier.traceparent;
}

function linkTo(traceparent: string): Link | null {
  const sc = trace.getSpanContext(extract(traceparent));
  return sc ? { context: sc } : null;
}

export function createTracing(cfg: TracingConfig): Tracing {
  const base = cfg.endpoint.replace(/\/+$/, "");
  const exporter = new OTLPTraceExporter({ url: `${base}/v1/traces`, headers: { ...cfg.headers } });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": cfg.serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 })],
  });
  const tracer = provider.getTracer("switchboard");

  return {
    async span(name, sessionKey, fn, opts?: SpanOptions) {
      const links = (opts?.links ?? []).map(linkTo).filter((l): l is Link => l !== null);
      const span = tracer.startSpan(
        name,
        {
          kind: name === "switchboard.turn" ? SpanKind.CONSUMER : SpanKind.INTERNAL,
          attributes: { "switchboard.session_key": sessionKey, ...opts?.attributes },
          ...(links.length ? { links } : {}),
        },
        opts?.parent ? extract(opts.parent) : ROOT_CONTEXT,
      );
      try {
        return await fn(traceparentOf(span));
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorClass(err) });
        throw err;
      } finally {
        span.end();
      }
    },
    enqueue(sessionKey, attributes: SpanAttributes, link) {
      const l = link ? linkTo(link) : null;
      const span = tracer.startSpan(
        "switchboard.enqueue",
        {
          root: true,
          kind: SpanKind.PRODUCER,
          attributes: { "switchboard.session_key": sessionKey, ...attributes },
          ...(l ? { links: [l] } : {}),
        },
        ROOT_CONTEXT,
      );
      span.end();
      return traceparentOf(span);
    },
    shutdown: () => provider.shutdown(),
  };
}
