/**
 * Reads a V8 CPU profile (`node --cpu-prof`, e.g. the gateway bench with
 * BENCH_GATEWAY_NODE_FLAGS="--cpu-prof --cpu-prof-interval=200 --cpu-prof-dir=DIR") and prints the
 * functions with the most self time and the most inclusive time (a function counted once per
 * sample however often it is on the stack). Not part of `npm run bench`:
 *
 *   node dist/bench/cpu-profile.js DIR/CPU.*.cpuprofile [selfRows=40] [inclusiveRows=60]
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function frameName(n: ProfileNode): string {
  const { functionName, url, lineNumber } = n.callFrame;
  return `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber}`;
}

/** Self and inclusive microseconds by function, and the profile's total. */
function summarize(p: Profile): {
  self: Map<string, number>;
  inclusive: Map<string, number>;
  total: number;
} {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const hits = new Map<number, number>();
  let total = 0;
  p.samples.forEach((id, i) => {
    const dt = p.timeDeltas[i] ?? 0;
    hits.set(id, (hits.get(id) ?? 0) + dt);
    total += dt;
  });
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of hits) {
    const leaf = byId.get(id);
    if (!leaf) continue;
    const name = frameName(leaf);
    self.set(name, (self.get(name) ?? 0) + us);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const node = byId.get(cur);
      if (!node) break;
      const k = frameName(node);
      if (seen.has(k)) continue;
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + us);
    }
  }
  return { self, inclusive, total };
}

function table(m: Map<string, number>, rows: number, total: number): string {
  return [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, rows)
    .map(
      ([name, us]) =>
        `${(us / 1000).toFixed(0).padStart(8)} ms ${((100 * us) / total).toFixed(1).padStart(5)}%  ${name}`,
    )
    .join("\n");
}

const [file, selfRows = "40", inclusiveRows = "60"] = process.argv.slice(2);
const rowCount = (v: string) => /^\d+$/.test(v);
if (!file || !rowCount(selfRows) || !rowCount(inclusiveRows)) {
  process.stderr.write("usage: node dist/bench/cpu-profile.js FILE.cpuprofile [selfRows] [inclusiveRows]\n");
  process.exit(2);
}
const { self, inclusive, total } = summarize(JSON.parse(readFileSync(file, "utf8")) as Profile);
process.stdout.write(
  `total ${(total / 1000).toFixed(0)} ms (idle included)\n` +
    `SELF\n${table(self, Number(selfRows), total)}\n` +
    `INCLUSIVE\n${table(inclusive, Number(inclusiveRows), total)}\n`,
);
