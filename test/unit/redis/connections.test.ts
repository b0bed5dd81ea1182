import { once } from "node:events";
import { connect, createServer, type Server, type Socket } from "node:net";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../src/log.js";
import { coalesceWrites, RedisConnections } from "../../../src/redis/connections.js";
import { REDIS_URL, randomPrefix } from "../../helpers.js";
import { describeRedis } from "../../redis.js";

/** Counts the writes that reach the socket's handle: one `_write` or `_writev` is one syscall's worth. */
function countFlushes(socket: Socket): { flushes: number[] } {
  const seen = { flushes: [] as number[] };
  const s = socket as Socket & {
    _write: (chunk: unknown, enc: BufferEncoding, cb: (err?: Error | null) => void) => void;
    _writev: (chunks: unknown[], cb: (err?: Error | null) => void) => void;
  };
  const write = s._write.bind(s);
  const writev = s._writev.bind(s);
  s._write = (chunk, enc, cb) => {
    seen.flushes.push(1);
    write(chunk, enc, cb);
  };
  s._writev = (chunks, cb) => {
    seen.flushes.push(chunks.length);
    writev(chunks, cb);
  };
  return seen;
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("coalesceWrites", () => {
  let server: Server;
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  async function pair(): Promise<{ client: Socket; received: () => string }> {
    let text = "";
    server = createServer((peer) => {
      sockets.push(peer);
      peer.setEncoding("utf8").on("data", (d: string) => {
        text += d;
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as { port: number };
    const client = connect(port, "127.0.0.1");
    sockets.push(client);
    await once(client, "connect");
    return { client, received: () => text };
  }

  it("sends what one tick wrote in one write, in order, and each later tick in its own", async () => {
    const { client, received } = await pair();
    coalesceWrites(client);
    const seen = countFlushes(client);
    client.write("a");
    client.write(Buffer.from("b"));
    client.write("c");
    expect(seen.flushes).toEqual([]); // held until the tick ends
    await tick();
    expect(seen.flushes).toEqual([3]);
    client.write("d");
    await tick();
    client.write("e");
    client.write("f");
    await tick();
    expect(seen.flushes).toEqual([3, 1, 2]);
    await expect.poll(received).toBe("abcdef");
  });

  it("is applied once however often it is called", async () => {
    const { client, received } = await pair();
    coalesceWrites(client);
    coalesceWrites(client);
    const seen = countFlushes(client);
    client.write("x");
    client.write("y");
    await tick();
    expect(seen.flushes).toEqual([2]);
    await expect.poll(received).toBe("xy");
  });
});

describeRedis("RedisConnections: commands issued in one tick", () => {
  const conns = new RedisConnections(silentLogger());
  const prefix = randomPrefix("conn");
  afterAll(async () => {
    const c = await conns.shared(REDIS_URL, "storage.redisUrl");
    const keys = await c.keys(`${prefix}:*`);
    if (keys.length > 0) await c.del(...keys);
    await conns.close();
  });

  it("leave the shared client in one write, each with its own reply, also after a reconnect", async () => {
    const client = await conns.shared(REDIS_URL, "storage.redisUrl");
    for (const round of [1, 2]) {
      const stream = (client as unknown as { stream: Socket }).stream;
      const seen = countFlushes(stream);
      const n = 20;
      const sets = Array.from({ length: n }, (_, i) => client.set(`${prefix}:${i}`, `v${round}.${i}`));
      const gets = Array.from({ length: n }, (_, i) => client.get(`${prefix}:${i}`));
      expect(await Promise.all(sets)).toEqual(Array(n).fill("OK"));
      expect(await Promise.all(gets)).toEqual(Array.from({ length: n }, (_, i) => `v${round}.${i}`));
      expect(seen.flushes).toEqual([2 * n]);
      if (round === 1) {
        client.disconnect(true); // ioredis reconnects on a new socket
        await once(client, "ready");
        expect((client as unknown as { stream: Socket }).stream).not.toBe(stream);
      }
    }
  });

  it("a blocking client coalesces too", async () => {
    const client = conns.blocking(REDIS_URL);
    await once(client, "ready");
    const seen = countFlushes((client as unknown as { stream: Socket }).stream);
    const replies = await Promise.all([client.ping(), client.ping("two"), client.echo("three")]);
    expect(replies).toEqual(["PONG", "two", "three"]);
    expect(seen.flushes).toEqual([3]);
  });
});
