import type { IncomingMessage } from "node:http";
import { gunzipSync } from "node:zlib";
import { loopbackServer } from "./http.js";

/**
 * A loopback OTLP/HTTP trace receiver: records every `POST /v1/traces` (the JSON encoding the
 * official OTLP/HTTP exporter sends) and flattens the spans for assertions.
 *
 *   const otlp = await startOtlpFake();
 *   // config: telemetry: { otlp: { endpoint: otlp.url, headers: { "x-key": "k" } } }
 *   await otlp.waitFor((spans) => spans.some((s) => s.name === "switchboard.turn"));
 */

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
};
interface KeyValue {
  key: string;
  value: AnyValue;
}

export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  kind?: number;
  attributes: Record<string, string | number | boolean>;
  links: Array<{ traceId: string; spanId: string }>;
  status?: { code?: number; message?: string };
  /** The resource's `service.name`. */
  service: string;
}

export interface OtlpFake {
  url: string;
  spans: ReceivedSpan[];
  /** Request headers of every export. */
  headers: Array<Record<string, string | string[] | undefined>>;
  /** Paths POSTed to (every one should be /v1/traces). */
  paths: string[];
  waitFor(pred: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

function value(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  return v.doubleValue ?? "";
}

function attrs(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, value(kv.value)]));
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        name: string;
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        kind?: number;
        attributes?: KeyValue[];
        links?: Array<{ traceId: string; spanId: string }>;
        status?: { code?: number; message?: string };
      }>;
    }>;
  }>;
}

export async function startOtlpFake(): Promise<OtlpFake> {
  const spans: ReceivedSpan[] = [];
  const headers: OtlpFake["headers"] = [];
  const paths: string[] = [];
  const srv = await loopbackServer((req, res) => {
    void (async () => {
      paths.push(req.url ?? "");
      headers.push({ ...req.headers });
      const data = JSON.parse((await body(req)).toString("utf8")) as ExportRequest;
      for (const rs of data.resourceSpans ?? []) {
        const service = String(attrs(rs.resource?.attributes)["service.name"] ?? "");
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              name: s.name,
              traceId: s.traceId,
              spanId: s.spanId,
              ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
              ...(s.kind !== undefined ? { kind: s.kind } : {}),
              attributes: attrs(s.attributes),
              links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              ...(s.status ? { status: s.status } : {}),
              service,
            });
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    })().catch(() => {
      res.writeHead(400);
      res.end();
    });
  });
  return {
    url: srv.url,
    spans,
    headers,
    paths,
    async waitFor(pred, timeoutMs = 8000) {
      const until = Date.now() + timeoutMs;
      while (!pred(spans)) {
        if (Date.now() > until)
          throw new Error(`OTLP fake: spans not as expected: ${spans.map((s) => s.name).join(", ")}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      return spans;
    },
    close: () => srv.close(),
  };
}
