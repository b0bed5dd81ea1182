/**
 * The least a Node gateway can do per turn, as a yardstick for bench/gateway.ts: a bare node:http
 * server that takes `POST /rpc` `chat.send` (bearer token, JSON body), appends the user message to
 * a JSONL file and makes it durable (group commit: one fdatasync in flight, every append that
 * arrives meanwhile shares the next one), calls the model over a keep-alive node:http agent with
 * the session's newest 200 messages and eight tool schemas (about the size of the `coding`
 * profile's), appends the reply and answers. No routing, no session index, no run records, no
 * validation beyond the JSON: what it costs per turn on a machine is what any Node process doing
 * the same I/O costs there, so the gateway's figures can be read against it from the same run.
 *
 * Usage: node dist/bench/bare-relay.js <port> <modelBaseUrl> <dir> <token>
 */
import { fdatasync, openSync, writeSync } from "node:fs";
import { Agent, createServer, type IncomingMessage, request } from "node:http";
import path from "node:path";

const [portArg, modelBase, dir, token] = process.argv.slice(2);
if (!portArg || !modelBase || !dir || !token) {
  process.stderr.write("usage: bare-relay <port> <modelBaseUrl> <dir> <token>\n");
  process.exit(2);
}
const modelUrl = new URL(`${modelBase.replace(/\/$/, "")}/chat/completions`);
const fd = openSync(path.join(dir, "relay.jsonl"), "a");
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const auth = `Bearer ${token}`;

/** Eight function tools, ~1 KB of JSON schema each: the request carries them every turn. */
const TOOLS = Array.from({ length: 8 }, (_, i) => ({
  type: "function",
  function: {
    name: `tool_${i}`,
    description: `Tool ${i}: ${"does one well-described thing with its arguments. ".repeat(8)}`,
    parameters: {
      type: "object",
      properties: Object.fromEntries(
        ["path", "text", "limit", "offset", "pattern", "mode"].map((p) => [
          p,
          { type: p === "limit" || p === "offset" ? "integer" : "string", description: `The ${p} to use.` },
        ]),
      ),
      required: ["path"],
      additionalProperties: false,
    },
  },
}));

interface Msg {
  id: string;
  role: "user" | "assistant";
  content: string;
  ts: number;
}
const sessions = new Map<string, Msg[]>();

// group commit
let syncing = false;
let waiting: Array<() => void> = [];
function durable(): Promise<void> {
  return new Promise<void>((resolve) => {
    waiting.push(resolve);
    if (!syncing) syncNext();
  });
}
function syncNext(): void {
  const batch = waiting;
  waiting = [];
  syncing = true;
  fdatasync(fd, () => {
    syncing = false;
    for (const r of batch) r();
    if (waiting.length > 0) syncNext();
  });
}

function callModel(body: string): Promise<{ choices: Array<{ message: { content: string } }> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: modelUrl.hostname,
        port: modelUrl.port,
        path: modelUrl.pathname,
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          authorization: "Bearer bench-key",
        },
      },
      (res) => {
        let s = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          s += c;
        });
        res.on("end", () => {
          try {
            resolve(JSON.parse(s));
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let s = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => {
      s += c;
    });
    req.on("end", () => resolve(s));
    req.on("error", reject);
  });
}

let seq = 0;
const server = createServer(async (req, res) => {
  const reply = (status: number, payload: unknown) => {
    const text = JSON.stringify(payload);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  if (req.method === "GET" && req.url === "/healthz") return reply(200, { ok: true });
  if (req.method !== "POST" || req.url !== "/rpc") return reply(404, { ok: false });
  if (req.headers.authorization !== auth) return reply(401, { ok: false });
  try {
    const msg = JSON.parse(await readBody(req)) as {
      id?: unknown;
      params?: { sessionKey?: string; message?: string };
    };
    const key = msg.params?.sessionKey ?? "";
    const text = msg.params?.message ?? "";
    let history = sessions.get(key);
    if (!history) {
      history = [];
      sessions.set(key, history);
    }
    const user: Msg = { id: `m${++seq}`, role: "user", content: text, ts: Date.now() };
    writeSync(fd, `${JSON.stringify({ session: key, ...user })}\n`);
    history.push(user);
    await durable();
    const window = history.slice(-200).map((m) => ({ role: m.role, content: m.content }));
    const completion = await callModel(
      JSON.stringify({
        model: "bench",
        messages: [{ role: "system", content: "You are a helpful assistant." }, ...window],
        tools: TOOLS,
      }),
    );
    const answer: Msg = {
      id: `m${++seq}`,
      role: "assistant",
      content: completion.choices[0]?.message.content ?? "",
      ts: Date.now(),
    };
    writeSync(fd, `${JSON.stringify({ session: key, ...answer })}\n`);
    history.push(answer);
    if (history.length > 400) history.splice(0, history.length - 400);
    reply(200, { id: msg.id, ok: true, result: { status: "ok", runId: answer.id, reply: answer.content } });
  } catch (err) {
    reply(500, { ok: false, error: { message: (err as Error).message } });
  }
});
server.listen(Number(portArg), "127.0.0.1");
process.on("SIGTERM", () => {
  server.close();
  agent.destroy();
  process.exit(0);
});
