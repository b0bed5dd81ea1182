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
