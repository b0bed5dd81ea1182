import {
  type ClientRequest,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import type { Abortable } from "./retry.js";

/**
 * A `fetch` for the model SDKs over node:http(s) with keep-alive agents. Node's built-in fetch
 * (undici's WHATWG implementation) costs about as much CPU per model call as the whole rest of
 * a turn; this one sends the same request with a plain `http.request` and hands the SDK a
 * standard `Response` whose body streams (SSE works as before). Anything it does not handle — a
 * body that is not text or bytes — goes to the global fetch.
 */

const agents = {
  "http:": new HttpAgent({ keepAlive: true, maxSockets: 256 }),
  "https:": new HttpsAgent({ keepAlive: true, maxSockets: 256 }),
};

type FetchArgs = Parameters<typeof fetch>;

function headersOf(init: RequestInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  if (!init) return out;
  new Headers(init).forEach((v, k) => {
    out[k] = v;
  });
  return out;
}

function responseHeaders(res: IncomingMessage): Headers {
  const h = new Headers();
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
    h.append(res.rawHeaders[i] ?? "", res.rawHeaders[i + 1] ?? "");
  }
  return h;
}

function abortError(signal: Abortable): unknown {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  return new DOMException("This operation was aborted", "AbortError");
}

/** Writes a body into the request (in order, waiting on the socket as it likes); the request is ended after. */
export type BodyWriter = (req: ClientRequest) => Promise<void>;

export interface SendOptions {
  method: string;
  headers: Record<string, string>;
  signal?: Abortable | undefined;
}

/**
 * One request over the keep-alive agents; resolves with the response once its headers arrived
 * (the caller reads the body). An abort before that destroys the request and rejects with the
 * signal's reason; after it, the response stream errors (the caller watches the signal).
 */
export function sendRequest(
  url: URL,
  opts: SendOptions,
  /**
   * Pieces are written in order (one writev once the socket is there), then the request ends; a
   * writer writes what it likes (a failed writer destroys the request with its error).
   */
  body?: string | Uint8Array | ReadonlyArray<string | Uint8Array> | BodyWriter | null,
): Promise<IncomingMessage> {
  const agent = agents[url.protocol as keyof typeof agents];
  if (!agent) return Promise.reject(new TypeError(`unsupported protocol ${url.protocol}`));
  const signal = opts.signal;
  if (signal?.aborted) return Promise.reject(abortError(signal));
  return new Promise<IncomingMessage>((resolve, reject) => {
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(url, { method: opts.method, headers: opts.headers, agent }, (res) => {
      res.once("close", () => signal?.removeEventListener("abort", onAbort));
      resolve(res);
    });
    function onAbort() {
      const err = abortError(signal as Abortable);
      req.destroy(err instanceof Error ? err : undefined);
      reject(err);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    req.once("error", (err) => {
      signal?.removeEventListener("abort", onAbort);
      reject(signal?.aborted ? abortError(signal) : err);
    });
    if (typeof body === "function")
      body(req).then(
        () => req.end(),
        (err: unknown) => req.destroy(err instanceof Error ? err : new Error(String(err))),
      );
    else if (Array.isArray(body)) {
      for (const part of body as ReadonlyArray<string | Uint8Array>) req.write(part);
      req.end();
    } else req.end((body as string | Uint8Array | null | undefined) ?? undefined);
  });
}

export async function nodeFetch(input: FetchArgs[0], init: FetchArgs[1] = {}): Promise<Response> {
  const url = new URL(input instanceof Request ? input.url : String(input));
  const body = init.body;
  if (
    !(url.protocol in agents) ||
    input instanceof Request ||
    (body != null && typeof body !== "string" && !(body instanceof Uint8Array))
  ) {
    return fetch(input, init);
  }
  const method = init.method ?? "GET";
  const res = await sendRequest(
    url,
    { method, headers: headersOf(init.headers), signal: init.signal ?? undefined },
    body,
  );
  const status = res.statusCode ?? 502;
  const nullBody = status === 204 || status === 205 || status === 304 || method === "HEAD";
  if (nullBody) res.resume();
  return new Response(nullBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
    status,
    statusText: res.statusMessage ?? "",
    headers: responseHeaders(res),
  });
}
