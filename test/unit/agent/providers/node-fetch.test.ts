import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nodeFetch } from "../../../../src/agent/providers/node-fetch.js";

/** The keep-alive fetch the model SDKs use: same answers as WHATWG fetch for what they send. */

let server: Server;
let base = "";
const seen: Array<{ method?: string; headers: Record<string, unknown>; body: string }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      seen.push({ method: req.method, headers: req.headers, body });
      if (req.url === "/sse") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write("data: 1\n\n");
        setTimeout(() => res.end("data: 2\n\n"), 20);
      } else if (req.url === "/empty") {
        res.writeHead(204);
        res.end();
      } else if (req.url === "/hang") {
        res.writeHead(200);
        res.write("partial");
      } else {
        res.writeHead(429, { "retry-after": "3", "x-multi": ["a", "b"] });
        res.end(JSON.stringify({ error: { message: "slow down" } }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

describe("nodeFetch", () => {
  it("sends method, headers and body, and answers status, headers and a JSON body", async () => {
    const res = await nodeFetch(`${base}/json`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer k" },
      body: JSON.stringify({ a: 1 }),
    });
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("3");
    expect(res.headers.get("x-multi")).toBe("a, b");
    expect(await res.json()).toEqual({ error: { message: "slow down" } });
    const req = seen.at(-1);
    expect(req?.method).toBe("POST");
    expect(req?.headers.authorization).toBe("Bearer k");
    expect(JSON.parse(req?.body ?? "")).toEqual({ a: 1 });
  });

  it("streams the body as it arrives (SSE)", async () => {
    const res = await nodeFetch(`${base}/sse`);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe("data: 1\n\n");
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read())
      rest += new TextDecoder().decode(r.value);
    expect(rest).toBe("data: 2\n\n");
  });

  it("answers a null body for 204", async () => {
    const res = await nodeFetch(`${base}/empty`);
    expect(res.status).toBe(204);
    expect(res.body).toBeNull();
  });

  it("rejects with the caller's abort reason, before and during a response", async () => {
    const early = new AbortController();
    early.abort(new Error("stop early"));
    await expect(nodeFetch(`${base}/json`, { signal: early.signal })).rejects.toThrow("stop early");

    const late = new AbortController();
    const pending = nodeFetch(`${base}/never`, { signal: late.signal, method: "POST", body: "x".repeat(10) });
    late.abort(new Error("stop now"));
    await expect(pending).rejects.toThrow("stop now");

    const mid = new AbortController();
    const res = await nodeFetch(`${base}/hang`, { signal: mid.signal });
    const text = res.text();
    mid.abort(new Error("stop mid-body"));
    await expect(text).rejects.toBeDefined();
  });

  it("rejects on a connection error", async () => {
    await expect(nodeFetch("http://127.0.0.1:1/")).rejects.toThrow();
  });
});
