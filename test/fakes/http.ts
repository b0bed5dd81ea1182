import http from "node:http";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";

/** A fake platform's server on loopback. */
export interface LoopbackServer {
  server: http.Server;
  port: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Ends open WebSockets and keep-alive connections, then closes the server. */
  close(): Promise<void>;
}

export interface LoopbackOptions {
  /** WebSocket upgrades on paths starting with `path` reach `onSocket`; any other upgrade is refused. */
  ws?: { path: string; onSocket: (ws: WebSocket) => void };
}

/**
 * The scaffolding every fake HTTP server shares: node:http on 127.0.0.1 at a free port (0), an
 * optional WebSocket endpoint, and a close that does not wait for idle keep-alive sockets.
 */
export async function loopbackServer(
  handler: http.RequestListener,
  opts: LoopbackOptions = {},
): Promise<LoopbackServer> {
  const server = http.createServer(handler);
  let wss: WebSocketServer | undefined;
  const { ws } = opts;
  if (ws) {
    const sockets = new WebSocketServer({ noServer: true });
    wss = sockets;
    server.on("upgrade", (req, socket, head) => {
      if (!req.url?.startsWith(ws.path)) return socket.destroy();
      sockets.handleUpgrade(req, socket, head, (client) => ws.onSocket(client));
    });
  }
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      if (wss) {
        for (const client of wss.clients) client.terminate();
        wss.close();
      }
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One parsed multipart/form-data body: text fields and file parts (bytes in memory; test sizes). */
export interface MultipartBody {
  fields: Record<string, string>;
  files: Array<{ field: string; filename: string; mimeType: string; bytes: Buffer }>;
}

/**
 * Parses a multipart body with @fastify/busboy (the parser @fastify/multipart uses; Node 20's
 * `Response.formData()` rejects grammY's multipart bodies).
 */
export async function parseMultipart(contentType: string, body: Buffer): Promise<MultipartBody> {
  const { Busboy } = await import("@fastify/busboy");
  return new Promise((resolve, reject) => {
    const out: MultipartBody = { fields: {}, files: [] };
    const bb = Busboy({ headers: { "content-type": contentType } });
    const pending: Promise<void>[] = [];
    bb.on("field", (name, value) => {
      out.fields[name] = value;
    });
    bb.on("file", (field, stream, filename, _enc, mimeType) => {
      pending.push(
        (async () => {
          const chunks: Buffer[] = [];
          for await (const c of stream) chunks.push(c as Buffer);
          out.files.push({ field, filename, mimeType, bytes: Buffer.concat(chunks) });
        })(),
      );
    });
    bb.on("finish", () => {
      Promise.all(pending).then(() => resolve(out), reject);
    });
    bb.on("error", reject);
    bb.end(body);
  });
}
