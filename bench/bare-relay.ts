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
 * With a Redis URL it is the least a BullMQ gateway does instead: the HTTP process adds one BullMQ
 * job per turn and waits for a PUBLISH naming it; a worker process (BullMQ Worker, concurrency 64)
 * appends the message to a Redis stream, reads the newest 200 back (one XREVRANGE), calls the
 * model, appends the reply and publishes — about ten Redis commands a turn, BullMQ's own included.
 *
 * Usage: node dist/bench/bare-relay.js <port> <modelBaseUrl> <dir> <token> [<redisUrl> <prefix>]
 *        node dist/bench/bare-relay.js worker <modelBaseUrl> <redisUrl> <prefix>
 */
import { fdatasync, openSync, writeSync } from "node:fs";
import { Agent, createServer, request } from "node:http";
import path from "node:path";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { readText } from "./read-text.js";

const argv = process.argv.slice(2);
const role = argv[0] === "worker" ? "worker" : "gateway";
const [portArg, modelBase, dir, token, redisUrl, prefix] =
  role === "worker" ? ["", argv[1], "", "", argv[2], argv[3]] : argv;
if (!modelBase || (role === "gateway" && (!portArg || !dir || !token)) || (role === "worker" && !prefix)) {
  process.stderr.write(
    "usage: bare-relay <port> <modelBaseUrl> <dir> <token> [<redisUrl> <prefix>] | worker <modelBaseUrl> <redisUrl> <prefix>\n",
  );
  process.exit(2);
}
const modelUrl = new URL(`${modelBase.replace(/\/$/, "")}/chat/completions`);
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const auth = `Bearer ${token}`;
const redis = (url: string) => new Redis(url, { maxRetriesPerRequest: null });

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
const fd = role === "gateway" && !redisUrl ? openSync(path.join(dir ?? "", "relay.jsonl"), "a") : -1;

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

/** The model request of a session whose newest messages are `window`. */
function modelBody(window: Array<{ role: string; content: string }>): string {
  return JSON.stringify({
    model: "bench",
    messages: [{ role: "system", content: "You are a helpful assistant." }, ...window],
    tools: TOOLS,
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
        readText(res)
          .then((s) => resolve(JSON.parse(s)))
          .catch(reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

let seq = 0;

/** fs role: the turn in this process, its user message made durable by the group commit. */
async function fsTurn(key: string, text: string): Promise<{ runId: string; reply: string }> {
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
  const completion = await callModel(modelBody(window));
  const answer: Msg = {
    id: `m${++seq}`,
    role: "assistant",
    content: completion.choices[0]?.message.content ?? "",
    ts: Date.now(),
  };
  writeSync(fd, `${JSON.stringify({ session: key, ...answer })}\n`);
  history.push(answer);
  if (history.length > 400) history.splice(0, history.length - 400);
  return { runId: answer.id, reply: answer.content };
}

/** bullmq role (HTTP side): one job per turn, answered by a PUBLISH on `{<prefix>}:done`. */
async function bullmqTurns(
  url: string,
  tag: string,
): Promise<(key: string, text: string) => Promise<{ runId: string; reply: string }>> {
  const queue = new Queue("relay", { connection: redis(url), prefix: `{${tag}}` });
  const sub = redis(url);
  const replies = new Map<string, (reply: string) => void>();
  sub.on("message", (_channel: string, raw: string) => {
    const i = raw.indexOf(" ");
    const id = raw.slice(0, i);
    replies.get(id)?.(raw.slice(i + 1));
    replies.delete(id);
  });
  // Subscribed before the server listens (and /healthz answers), so no reply can be missed.
  await sub.subscribe(`{${tag}}:done`);
  return async (key, text) => {
    const runId = `r${process.pid}-${++seq}`;
    const done = new Promise<string>((resolve) => replies.set(runId, resolve));
    await queue.add("turn", { key, text }, { jobId: runId, removeOnComplete: true, removeOnFail: true });
    return { runId, reply: await done };
  };
}

/** bullmq role (worker side): the turn against a Redis stream per session. */
function startWorker(url: string, tag: string): void {
  const client = redis(url);
  new Worker(
    "relay",
    async (job) => {
      const { key, text } = job.data as { key: string; text: string };
      const stream = `{${tag}}:t:${key}`;
      await client.xadd(stream, "MAXLEN", "~", "1000", "*", "role", "user", "content", text);
      const rows = (await client.xrevrange(stream, "+", "-", "COUNT", 200)) as Array<[string, string[]]>;
      const window = rows.reverse().map(([, f]) => ({ role: f[1] ?? "user", content: f[3] ?? "" }));
      const completion = await callModel(modelBody(window));
      const reply = completion.choices[0]?.message.content ?? "";
      await client.xadd(stream, "MAXLEN", "~", "1000", "*", "role", "assistant", "content", reply);
      await client.publish(`{${tag}}:done`, `${job.id} ${reply}`);
    },
    { connection: redis(url), prefix: `{${tag}}`, concurrency: 64 },
  );
}

if (role === "worker") startWorker(redisUrl ?? "", prefix ?? "");
else {
  const turn = redisUrl ? await bullmqTurns(redisUrl, prefix ?? "bare") : fsTurn;
  const server = createServer(async (req, res) => {
    const reply = (status: number, payload: unknown) => {
      const text = JSON.stringify(payload);
      res.writeHead(status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
      });
      res.end(text);
    };
    if (req.method === "GET" && req.url === "/healthz") return reply(200, { ok: true });
    if (req.method !== "POST" || req.url !== "/rpc") return reply(404, { ok: false });
    if (req.headers.authorization !== auth) return reply(401, { ok: false });
    try {
      const msg = JSON.parse(await readText(req)) as {
        id?: unknown;
        params?: { sessionKey?: string; message?: string };
      };
      const r = await turn(msg.params?.sessionKey ?? "", msg.params?.message ?? "");
      reply(200, { id: msg.id, ok: true, result: { status: "ok", ...r } });
    } catch (err) {
      reply(500, { ok: false, error: { message: (err as Error).message } });
    }
  });
  server.listen(Number(portArg), "127.0.0.1");
}
process.on("SIGTERM", () => {
  agent.destroy();
  process.exit(0);
});
