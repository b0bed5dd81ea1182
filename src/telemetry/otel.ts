import {
  type Context,
  context,
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
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { errorClass } from "./metrics.js";
import type { SpanAttributes, SpanOptions, Tracing, TracingConfig } from "./types.js";

/**
 * The OpenTelemetry side of tracing, imported only when `telemetry.otlp.endpoint` is set (see
 * trace.ts). Manual spans through the official SDK (no auto-instrumentation), exported in batches
 * over OTLP/HTTP to `<endpoint>/v1/traces`.
 *
 * The provider is registered (with the AsyncLocalStorage context manager, so spans nest across
 * awaits) but no global propagator is: no trace header is ever sent to a model provider or a chat
 * platform. @anthropic-ai/sdk sees the registered provider and records its own CLIENT span of each
 * API call (metadata only, no prompt or reply content) under our `switchboard.model` span; set
 * `ANTHROPIC_OPEN_TELEMETRY=false` to leave them out. Error spans carry the error class only (never
 * the message, which may quote user text).
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

function extract(traceparent: string): Context {
  return W3C.extract(ROOT_CONTEXT, { traceparent }, getter);
}

function traceparentOf(ctx: Context): string | undefined {
  const carrier: Record<string, string> = {};
  W3C.inject(ctx, carrier, setter);
  return carrier.traceparent;
}

function linkTo(traceparent: string): Link | null {
  const sc = trace.getSpanContext(extract(traceparent));
  return sc ? { context: sc } : null;
}

export function createTracing(cfg: TracingConfig): Tracing {
  const base = cfg.endpoint.replace(/\/+$/, "");
  const exporter = new OTLPTraceExporter({ url: `${base}/v1/traces`, headers: { ...cfg.headers } });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": cfg.serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 })],
  });
  provider.register({ propagator: null });
  const tracer = provider.getTracer("switchboard");

  const run = async <T>(span: Span, fn: () => Promise<T>): Promise<T> => {
    try {
      return await context.with(trace.setSpan(context.active(), span), fn);
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: errorClass(err) });
      throw err;
    } finally {
      span.end();
    }
  };

  return {
    span(name, sessionKey, fn, opts?: SpanOptions) {
      const parent = opts?.parent ? extract(opts.parent) : context.active();
      const links = (opts?.links ?? []).map(linkTo).filter((l): l is Link => l !== null);
      const span = tracer.startSpan(
        name,
        {
          kind: name === "switchboard.turn" ? SpanKind.CONSUMER : SpanKind.INTERNAL,
          attributes: { "switchboard.session_key": sessionKey, ...opts?.attributes },
          ...(links.length ? { links } : {}),
        },
        parent,
      );
      return run(span, fn);
    },
    enqueue(sessionKey, attributes: SpanAttributes, link) {
      const l = link ? linkTo(link) : null;
      const span = tracer.startSpan("switchboard.enqueue", {
        root: true,
        kind: SpanKind.PRODUCER,
        attributes: { "switchboard.session_key": sessionKey, ...attributes },
        ...(l ? { links: [l] } : {}),
      });
      span.end();
      return traceparentOf(trace.setSpan(ROOT_CONTEXT, span));
    },
    active() {
      const span = trace.getActiveSpan();
      return span ? traceparentOf(trace.setSpan(ROOT_CONTEXT, span)) : undefined;
    },
    within(traceparent, fn) {
      return context.with(extract(traceparent), fn);
    },
    async shutdown() {
      try {
        await provider.shutdown();
      } finally {
        // Unregister, so a later start in this process (tests) registers its own.
        trace.disable();
        context.disable();
      }
    },
  };
}
