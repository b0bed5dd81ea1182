import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";

/**
 * fetch for the Streamable HTTP transport with a ceiling on each response body: the SDK reads a
 * JSON answer whole and an SSE stream without limit, so a server that sends more than `maxBytes`
 * in one response has it cut off with an error instead of filling the gateway's memory.
 */
export function cappedFetch(maxBytes: number, base: FetchLike = fetch): FetchLike {
  return async (url, init) => {
    const res = await base(url, init);
    if (!res.body) return res;
    let seen = 0;
    const limited = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen > maxBytes)
            controller.error(new Error(`a response from the server is larger than ${maxBytes} bytes`));
          else controller.enqueue(chunk);
        },
      }),
    );
    return new Response(limited, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
