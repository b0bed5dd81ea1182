/**
 * Media on the real path (issue 47 item 6; DESIGN.md budgets): the built gateway started as
 * `npm start` starts it (bench/deployed.ts), the real grammY adapter long-polling the loopback
 * Telegram fake (test/fakes/telegram.ts, in this process), the app's own media sink and fs media
 * store, the `openai` provider against a loopback model answering "ok" at once.
 *
 * (a) Gateway CPU (every thread, from /proc/<pid>/task/<tid>/schedstat) for a DM carrying a ~2 MB
 *     random-noise JPEG (a new picture each turn: the store deduplicates and understanding is cached
 *     by mediaId) minus a text DM, turn = the update pushed → the reply posted back (sendMessage).
 *     Budget ≤ 30 ms.
 * (b) A ~49 MiB video (an `ftyp` box + random bytes: video/mp4 by its bytes, under the default
 *     `media.maxBytes.video` of 50 MiB; `channels.telegram.mediaMaxMb` is raised to 64 here, the
 *     default 20 is Telegram's own getFile limit) downloaded into the store: the gateway's VmRSS
 *     sampled every 10 ms during the turn, its peak minus the RSS just before. Budget ≤ 30 MB.
 *
 * BENCH_MEDIA_TURNS (default 8) photo and text turns measured, after as many of each to warm up;
 * BENCH_MEDIA_VIDEOS (default 2); BENCH_MEDIA_NODE_FLAGS adds node flags to the gateway;
 * BENCH_MEDIA_STDOUT=1 shows its log; BENCH_MEDIA_VIDEO_MB (default 49) the video's size.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import sharp from "sharp";
import { FakeTelegram, type FakeUser } from "../test/fakes/telegram.js";
import { machineReference } from "./machine.js";
import { cpuNs, envFlags, freePort, rssMb, spawnDeployed, stopProc, waitHealthy } from "./proc.js";
import { readText } from "./read-text.js";

const TOKEN = "bench-token-0123456789abcdef";
const MiB = 1024 * 1024;
const fmt = (n: number, d = 2) => n.toFixed(d);
const out = (s: string) => process.stdout.write(`${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An OpenAI-compatible model answering "ok" at once; keeps the newest request body's size and text. */
interface Model {
  url: string;
  server: Server;
  last: () => { bytes: number; body: string };
}

async function startModel(): Promise<Model> {
  let last = { bytes: 0, body: "" };
  let n = 0;
  const server = createServer((req, res) => {
    void readText(req).then((body) => {
      n++;
      last = { bytes: Buffer.byteLength(body), body };
      const usage = { prompt_tokens: 40, completion_tokens: 1, total_tokens: 41 };
      if (!body.includes('"stream":true')) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            id: `c${n}`,
            object: "chat.completion",
            created: 0,
            model: "bench",
            choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
            usage,
          }),
        );
        return;
      }
      const chunk = (delta: Record<string, unknown>, finish: string | null, u?: unknown) =>
        `data: ${JSON.stringify({ id: `c${n}`, object: "chat.completion.chunk", created: 0, model: "bench", choices: [{ index: 0, delta, finish_reason: finish }], ...(u ? { usage: u } : {}) })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(chunk({ role: "assistant", content: "ok" }, null));
      res.write(chunk({}, "stop", usage));
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1`, server, last: () => last };
}

/** A random-noise JPEG of about 2 MB (different each call). */
async function noiseJpeg(): Promise<Buffer> {
  const raw = randomBytes(1900 * 1400 * 3);
  return sharp(raw, { raw: { width: 1900, height: 1400, channels: 3 } })
    .jpeg({ quality: 88 })
    .toBuffer();
}

/** An MP4 `ftyp` box (isom, mp42) followed by random bytes: `total` bytes in all. */
function fakeMp4(total: number): Buffer {
  const ftyp = Buffer.alloc(24);
  ftyp.writeUInt32BE(24, 0);
  ftyp.write("ftypisom", 4, "latin1");
  ftyp.writeUInt32BE(0x200, 12);
  ftyp.write("isommp42", 16, "latin1");
  return Buffer.concat([ftyp, randomBytes(total - ftyp.length)]);
}

export async function run(): Promise<void> {
  const turns = Number(process.env.BENCH_MEDIA_TURNS ?? 8);
  const videos = Number(process.env.BENCH_MEDIA_VIDEOS ?? 2);
  out(
    `load average at start: ${loadavg()
      .map((l) => fmt(l))
      .join(" ")}; machine reference ${fmt(machineReference(), 1)} ms`,
  );
  // The cloud Bot API serves files up to 20 MiB; the fake's limit is lifted (as a self-hosted Bot API
  // server's would be) so the 50 MB figure measures the gateway's own download path.
  const tg = await FakeTelegram.start(undefined, { fileLimitBytes: 64 * MiB });
  const model = await startModel();
  const dir = mkdtempSync(path.join(tmpdir(), "sb-bench-media-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const cfg = {
    gateway: { host: "127.0.0.1", port, auth: { token: TOKEN } },
    stateDir: path.join(dir, "state"),
    models: {
      default: "fake/bench",
      providers: { fake: { kind: "openai", baseUrl: model.url, apiKey: "bench-key", maxRetries: 0 } },
    },
    // every chat its own session: a photo turn is measured without earlier photos in its prompt
    session: { dmScope: "per-peer" },
    channels: {
      webchat: { enabled: false },
      telegram: {
        accounts: { default: { token: tg.token, apiRoot: tg.apiRoot } },
        allowFrom: ["*"],
        mediaMaxMb: 64,
      },
    },
  };
  const cfgFile = path.join(dir, "switchboard.json");
  writeFileSync(cfgFile, JSON.stringify(cfg));
  const stderr: string[] = [];
  const gw = spawnDeployed(["bin/switchboard.js", "start", "--config", cfgFile], {
    stderr,
    stdout: Boolean(process.env.BENCH_MEDIA_STDOUT),
    nodeFlags: envFlags(process.env.BENCH_MEDIA_NODE_FLAGS),
  });
  const pid = gw.pid ?? 0;
  let chat = 1000;
  /** One DM in a fresh chat (each its own session, none with a long history); resolves on the reply. */
  const dm = async (extra: Record<string, unknown>, timeoutMs = 30_000): Promise<void> => {
    const id = ++chat;
    const from: FakeUser = { id, is_bot: false, first_name: "Bench" };
    tg.pushMessage({ id, type: "private" }, from, extra);
    const until = Date.now() + timeoutMs;
    while (!tg.sentMessages().some((m) => m.chat_id === String(id))) {
      if (Date.now() > until) throw new Error(`no reply in chat ${id} within ${timeoutMs} ms`);
      if (gw.exitCode !== null) throw new Error(`gateway exited with ${gw.exitCode}`);
      await sleep(2);
    }
  };
  const photoTurn = async (jpeg: Buffer) => {
    const fileId = tg.addFile(jpeg, `photos/${chat}.jpg`);
    await dm({
      caption: "what is this",
      photo: [{ file_id: fileId, file_unique_id: fileId, width: 1900, height: 1400, file_size: jpeg.length }],
    });
  };
  try {
    await waitHealthy(url, gw);
    const photos: Buffer[] = [];
    for (let i = 0; i < 2 * turns; i++) photos.push(await noiseJpeg());
    const mean = photos.reduce((s, p) => s + p.length, 0) / photos.length;
    // warm up both paths
    for (let i = 0; i < turns; i++) {
      await dm({ text: "ping" });
      await photoTurn(photos[i] as Buffer);
    }
    if (!model.last().body.includes("data:image/jpeg;base64,"))
      throw new Error("the model request carried no image_url data URL");
    const photoBodyKb = model.last().bytes / 1024;
    let textNs = 0;
    let photoNs = 0;
    for (let i = 0; i < turns; i++) {
      let c0 = cpuNs(pid);
      await dm({ text: "ping" });
      textNs += cpuNs(pid) - c0;
      c0 = cpuNs(pid);
      await photoTurn(photos[turns + i] as Buffer);
      photoNs += cpuNs(pid) - c0;
    }
    const textMs = textNs / 1e6 / turns;
    const photoMs = photoNs / 1e6 / turns;
    out(
      `telegram photo (${fmt(mean / MiB, 2)} MB noise JPEG 1900×1400) → model: gateway CPU ${fmt(photoMs)} ms/turn, ` +
        `a text turn ${fmt(textMs)} ms; the photo costs ${fmt(photoMs - textMs)} ms more [≤ 30] ` +
        `(${turns} turns each, every thread; model request ${fmt(photoBodyKb, 0)} KB)`,
    );

    for (let v = 0; v < videos; v++) {
      const bytes = fakeMp4(Number(process.env.BENCH_MEDIA_VIDEO_MB ?? 49) * MiB);
      const fileId = tg.addFile(bytes, `videos/${v}.mp4`);
      await sleep(300);
      const before = rssMb(pid);
      let peak = before;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          peak = Math.max(peak, rssMb(pid));
          await sleep(10);
        }
      })();
      const c0 = cpuNs(pid);
      const t0 = performance.now();
      await dm(
        {
          caption: "a clip",
          video: {
            file_id: fileId,
            file_unique_id: fileId,
            width: 640,
            height: 360,
            duration: 30,
            mime_type: "video/mp4",
            file_size: bytes.length,
          },
        },
        60_000,
      );
      const ms = performance.now() - t0;
      sampling = false;
      await sampler;
      const body = model.last().body;
      if (!/\[video[^\]]*video\/mp4/.test(body))
        throw new Error(
          `the video did not reach the model as stored: ${body.slice(Math.max(0, body.indexOf("a clip") - 100), body.indexOf("a clip") + 300)}`,
        );
      out(
        `telegram video ${v + 1} (${fmt(bytes.length / MiB, 0)} MiB) → store → model: gateway RSS ${fmt(before, 0)} MB before, ` +
          `peak ${fmt(peak, 0)} MB, rise ${fmt(peak - before, 1)} MB [≤ 30]; turn ${fmt(ms, 0)} ms, gateway CPU ${fmt((cpuNs(pid) - c0) / 1e6, 0)} ms`,
      );
    }
  } catch (err) {
    out(`media: FAILED ${(err as Error).message}\n${stderr.join("").slice(0, 2000)}`);
  } finally {
    await stopProc(gw);
    await tg.close();
    await new Promise<void>((r) => model.server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
    out(
      `load average at end: ${loadavg()
        .map((l) => fmt(l))
        .join(" ")}; machine reference ${fmt(machineReference(), 1)} ms`,
    );
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  await run();
}
