/**
 * Prompt building on a long session: a 100,000-message transcript with a compaction line every
 * 300 messages (as the runtime writes them), then the cost of what the runtime does before each
 * model call — find the latest compaction (bounded tail reads), prune, cut the window — and how
 * many bytes of the transcript that read. It must stay bounded: never the whole transcript.
 *
 * Three shapes: the latest compaction near the end (the normal case); the latest one 1,000
 * messages back (one very long turn: the second, larger read); and a session whose compaction is
 * further back than any read (both reads, then the window without a summary).
 *
 *   npx tsx bench/prompt-build.ts       # prints a table and one {"bench":"prompt-build",…} line
 */
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadSessionContext } from "../src/agent/compaction.js";
import { planPrompt } from "../src/agent/window.js";
import { contextPruningSchema } from "../src/config/context.js";
import { silentLogger } from "../src/log.js";
import { createFsStore } from "../src/store/fs/index.js";
import type { TranscriptMessage, TranscriptRef } from "../src/store/types.js";

const MESSAGES = 100_000;
const COMPACT_EVERY = 300;
const ITERATIONS = 200;

/** user → tool call → tool result → assistant, repeated. */
function line(i: number, sessionId: string): TranscriptMessage {
  const kind = i % 4;
  const base = { id: `m${i}`, sessionId, timestamp: 1_800_000_000_000 + i };
  const m: TranscriptMessage =
    kind === 0
      ? { ...base, role: "user", content: `question ${i}: ${"lorem ipsum ".repeat(8)}` }
      : kind === 1
        ? {
            ...base,
            role: "toolCall",
            toolCallId: `c${i}`,
            toolName: "read_file",
            content: { arguments: { i } },
          }
        : kind === 2
          ? {
              ...base,
              role: "toolResult",
              toolCallId: `c${i - 1}`,
              toolName: "read_file",
              content: "x".repeat(600),
            }
          : { ...base, role: "assistant", content: `answer ${i}`, usage: { input: 900, output: 20 } };
  return m;
}

async function writeTranscript(
  file: string,
  sessionId: string,
  compactionEvery: number,
  stopCompactingAt: number,
) {
  mkdirSync(path.dirname(file), { recursive: true });
  const out = createWriteStream(file);
  let chunk = "";
  for (let i = 0; i < MESSAGES; i++) {
    chunk += `${JSON.stringify(line(i, sessionId))}\n`;
    if (i > 0 && i % compactionEvery === 0 && i < stopCompactingAt) {
      const c: TranscriptMessage = {
        id: `compaction-${i}`,
        sessionId,
        role: "compaction",
        content: {
          summary: `Summary up to message ${i - 16}: ${"decisions and identifiers ".repeat(40)}`,
          fromId: "m0",
          toId: `m${i - 17}`,
          tokensBefore: 40_000,
          tokensAfter: 6000,
        },
        timestamp: 1_800_000_000_000 + i,
      };
      chunk += `${JSON.stringify(c)}\n`;
    }
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await new Promise<void>((r) => out.once("drain", () => r()));
      chunk = "";
    }
  }
  out.write(chunk);
  await new Promise<void>((resolve, reject) =>
    out.end((err?: Error | null) => (err ? reject(err) : resolve())),
  );
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round((s[Math.floor(s.length / 2)] ?? 0) * 1000) / 1000;
}

export interface PromptBuildBenchRow {
  shape: string;
  firstMs: number;
  medianMs: number;
  medianUncachedMs: number;
  messagesRead: number;
  bytesReadFirst: number;
  transcriptBytes: number;
  sentMessages: number;
  summary: boolean;
}

export async function run(): Promise<PromptBuildBenchRow[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "sb-bench-prompt-"));
  const shapes: Array<{ shape: string; every: number; stopAt: number }> = [
    { shape: "compaction near the end", every: COMPACT_EVERY, stopAt: MESSAGES },
    { shape: "latest compaction 1,000 back", every: COMPACT_EVERY, stopAt: MESSAGES - 1000 },
    { shape: "latest compaction 10,000 back", every: COMPACT_EVERY, stopAt: MESSAGES - 10_000 },
  ];
  const rows: PromptBuildBenchRow[] = [];
  try {
    for (const [n, s] of shapes.entries()) {
      const sessionId = `bench-${n}`;
      const file = path.join(dir, "agents", "main", "sessions", `${sessionId}.jsonl`);
      await writeTranscript(file, sessionId, s.every, s.stopAt);
    }
    const pruning = contextPruningSchema.parse({ mode: "always" });
    const plan = async (
      store: Awaited<ReturnType<typeof createFsStore>>,
      ref: TranscriptRef,
    ): Promise<{ sent: number; summary: boolean; read: number }> => {
      const ctx = await loadSessionContext(store.transcripts, ref, { compactionCount: 1 });
      const p = planPrompt(ctx, {
        system: "You are a helpful assistant.",
        specsTokens: 3000,
        windowTokens: 128_000,
        budgetRatio: 0.8,
        pruning,
      });
      return { sent: p.messages.length, summary: ctx.compaction !== null, read: ctx.read };
    };
    for (const [n, s] of shapes.entries()) {
      const ref: TranscriptRef = { agentId: "main", sessionId: `bench-${n}` };
      // Uncached: a store without a tail cache reads the file every time.
      const cold = await createFsStore({ stateDir: dir, logger: silentLogger(), tailCacheChars: 0 });
      const size = statSync(cold.transcripts.locate(ref)).size;
      const t0 = performance.now();
      const first = await plan(cold, ref);
      const firstMs = performance.now() - t0;
      const bytesReadFirst = cold.transcripts.readStats().tailBytesRead;
      const uncached: number[] = [];
      for (let i = 0; i < ITERATIONS / 4; i++) {
        const a = performance.now();
        await plan(cold, ref);
        uncached.push(performance.now() - a);
      }
      await cold.close();
      const warm = await createFsStore({ stateDir: dir, logger: silentLogger() });
      const times: number[] = [];
      for (let i = 0; i < ITERATIONS; i++) {
        const a = performance.now();
        await plan(warm, ref);
        times.push(performance.now() - a);
      }
      await warm.close();
      rows.push({
        shape: s.shape,
        firstMs: Math.round(firstMs * 1000) / 1000,
        medianMs: median(times),
        medianUncachedMs: median(uncached),
        messagesRead: first.read,
        bytesReadFirst,
        transcriptBytes: size,
        sentMessages: first.sent,
        summary: first.summary,
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pad = (v: string, w: number) => v.padEnd(w);
  process.stdout.write(
    `prompt build from a ${MESSAGES.toLocaleString("en")}-message session (compaction every ${COMPACT_EVERY}):\n`,
  );
  for (const r of rows) {
    process.stdout.write(
      `  ${pad(r.shape, 32)} first ${r.firstMs} ms · median ${r.medianMs} ms (tail cache) / ${r.medianUncachedMs} ms (no cache) · first read ${r.messagesRead} msgs, ${(r.bytesReadFirst / 1024).toFixed(0)} KiB of ${(r.transcriptBytes / 1048576).toFixed(1)} MiB · sent ${r.sentMessages} msgs${r.summary ? " + summary" : ", no summary found"}\n`,
    );
  }
  console.log(JSON.stringify({ bench: "prompt-build", messages: MESSAGES, rows }));
  return rows;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await run();
