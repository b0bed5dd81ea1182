import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Folder boundaries (STYLE habit 1) checked by scanning imports: one table of floors (DESIGN.md's
 * layer order, docs/architecture.md) that every relative import must descend, and a few walls the
 * order cannot say. The composition root (src/app/) is the only file that picks drivers and channels.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");

function files(dir: string): string[] {
  if (dir.endsWith(".ts")) return [dir];
  try {
    statSync(dir);
  } catch {
    return []; // a folder that does not exist (yet) has no imports
  }
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else if (p.endsWith(".ts")) out.push(p);
  }
  return out;
}

/** Every relative import of a file, resolved to a repository path (`.js` specifiers name the `.ts` source). */
function importsOf(file: string): Array<{ line: number; target: string }> {
  const text = readFileSync(file, "utf8");
  const out: Array<{ line: number; target: string }> = [];
  for (const m of text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)) {
    const spec = m[1] ?? "";
    if (!spec.startsWith(".")) continue;
    const line = text.slice(0, m.index).split("\n").length;
    const target = path.relative(ROOT, path.resolve(path.dirname(file), spec)).replace(/\.js$/, ".ts");
    out.push({ line, target });
  }
  return out;
}

/**
 * The layer order of DESIGN.md ("Layout", "Round 3 rooms"), lowest floor first. A room is a
 * folder (trailing `/`) or a single file. A file may import its own floor and any floor below it,
 * never one above: that is the whole rule, and every file under src/ and channels/ has a floor.
 */
const FLOORS: ReadonlyArray<{ floor: string; rooms: readonly string[] }> = [
  {
    floor: "ground",
    rooms: [
      "src/errors.ts",
      "src/log.ts",
      "src/redact.ts",
      "src/fence.ts",
      "src/hash.ts",
      "src/ids.ts",
      "src/deadlines.ts",
      "src/json-limits.ts",
      "src/ordered-set.ts",
      "src/exact.ts",
      "src/retry/",
      "src/telemetry/",
    ],
  },
  { floor: "config", rooms: ["src/config/"] },
  { floor: "storage", rooms: ["src/journal/", "src/redis/", "src/store/"] },
  {
    floor: "contracts and engines",
    rooms: ["src/channels/", "src/events.ts", "src/pipeline/", "src/media/"],
  },
  { floor: "adapters", rooms: ["channels/"] },
  { floor: "services", rooms: ["src/services/"] },
  { floor: "sessions", rooms: ["src/sessions/", "src/policy/", "src/history/", "src/usage/"] },
  { floor: "approvals and delivery", rooms: ["src/approvals/", "src/delivery/"] },
  { floor: "routing", rooms: ["src/routing/"] },
  { floor: "flows", rooms: ["src/flows/", "src/subagents/"] },
  { floor: "tools", rooms: ["src/tools/", "src/cron/"] },
  { floor: "agent", rooms: ["src/agent/"] },
  { floor: "gateway", rooms: ["src/gateway/"] },
  { floor: "mcp server", rooms: ["src/mcp/"] },
  { floor: "composition root", rooms: ["src/app/"] },
  { floor: "cli", rooms: ["src/cli/"] },
];

/** The floor of a repository path (the longest matching room), or null when no room holds it. */
function floorOf(rel: string): { index: number; floor: string; room: string } | null {
  let best: { index: number; floor: string; room: string } | null = null;
  FLOORS.forEach(({ floor, rooms }, index) => {
    for (const room of rooms) {
      const hit = room.endsWith("/") ? rel.startsWith(room) : rel === room;
      if (hit && (!best || room.length > best.room.length)) best = { index, floor, room };
    }
  });
  return best;
}

const sources = [...files(path.join(ROOT, "src")), ...files(path.join(ROOT, "channels"))].map((f) =>
  path.relative(ROOT, f),
);

describe("layer order (DESIGN.md): every import points down", () => {
  it("every file under src/ and channels/ has a floor", () => {
    expect(sources.filter((rel) => !floorOf(rel))).toEqual([]);
  });

  it("no relative import climbs from a lower floor to a higher one", () => {
    const bad: string[] = [];
    for (const rel of sources) {
      const from = floorOf(rel);
      if (!from) continue;
      for (const { line, target } of importsOf(path.join(ROOT, rel))) {
        const to = floorOf(target);
        if (to && to.index > from.index)
          bad.push(`${rel}:${line} (${from.floor}) imports ${target} (${to.floor})`);
      }
    }
    expect(bad).toEqual([]);
  });

  it("the table catches a climb and names file, line and both floors", () => {
    const from = floorOf("src/log.ts");
    const to = floorOf("src/policy/redact.ts");
    expect(from?.floor).toBe("ground");
    expect(to?.floor).toBe("sessions");
    expect((to?.index ?? 0) > (from?.index ?? 0)).toBe(true);
  });
});

/**
 * Walls within a floor or across it that the order alone does not say: drivers never import each
 * other or get picked outside the composition root, only src/app/ names an adapter, the CLI talks
 * to the gateway through its client.
 */
const rules: Array<{ from: string; mustNotImport: string[]; except?: string[] }> = [
  { from: "src", mustNotImport: ["channels/"], except: ["src/app/"] },
  ...[
    "src/tools",
    "src/agent",
    "src/routing",
    "src/gateway",
    "src/delivery",
    "src/flows",
    "src/subagents",
  ].map((from) => ({
    from,
    mustNotImport: ["src/store/fs", "src/store/redis", "src/pipeline/local", "src/pipeline/bullmq"],
  })),
  { from: "src/store/fs", mustNotImport: ["src/store/redis"] },
  { from: "src/store/redis", mustNotImport: ["src/store/fs"] },
  { from: "src/pipeline/local", mustNotImport: ["src/pipeline/bullmq", "src/store/fs", "src/store/redis"] },
  { from: "src/pipeline/bullmq", mustNotImport: ["src/pipeline/local", "src/store/fs", "src/store/redis"] },
  {
    from: "src/cli",
    mustNotImport: [
      "src/gateway/methods",
      "src/gateway/rpc",
      "src/gateway/server",
      "src/gateway/chat-send",
      "src/gateway/dashboard",
      "src/gateway/page",
      "src/gateway/hooks-agent",
    ],
  },
];

const channelDirs = readdirSync(path.join(ROOT, "channels")).filter((d) =>
  statSync(path.join(ROOT, "channels", d)).isDirectory(),
);

describe("folder boundaries", () => {
  for (const rule of rules) {
    it(`${rule.from} does not import ${rule.mustNotImport.join(", ")}`, () => {
      const bad: string[] = [];
      for (const f of files(path.join(ROOT, rule.from))) {
        const rel = path.relative(ROOT, f);
        if (rule.except?.some((e) => rel === e || rel.startsWith(e))) continue;
        for (const { line, target: imp } of importsOf(f)) {
          if (
            rule.mustNotImport.some(
              (p) => imp.startsWith(p.endsWith("/") ? p : `${p}/`) || imp.startsWith(`${p}.`),
            )
          ) {
            bad.push(`${rel}:${line} → ${imp}`);
          }
        }
      }
      expect(bad).toEqual([]);
    });
  }

  for (const dir of channelDirs) {
    it(`channels/${dir} imports only the channel contract and its kit, errors, log and leaf utilities from src/`, () => {
      const allowed = [
        "src/channels/types",
        "src/channels/inbound-retry",
        "src/channels/kit",
        "src/retry",
        "src/ordered-set", // a leaf: bounded caches, imports nothing
        "src/errors",
        "src/log",
      ];
      const bad: string[] = [];
      for (const f of files(path.join(ROOT, "channels", dir))) {
        for (const { target: imp } of importsOf(f)) {
          if (imp.startsWith("src/") && !allowed.some((a) => imp.startsWith(a)))
            bad.push(`${path.relative(ROOT, f)} → ${imp}`);
          if (imp.startsWith("channels/") && !imp.startsWith(`channels/${dir}`))
            bad.push(`${path.relative(ROOT, f)} → ${imp}`);
        }
      }
      expect(bad).toEqual([]);
    });
  }
});

describe("channel naming (STYLE habit 4)", () => {
  for (const dir of channelDirs) {
    it(`channels/${dir} exports create<Name>Channel and <Name>Channel`, async () => {
      const mod = (await import(path.join(ROOT, "channels", dir, "index.ts"))) as Record<string, unknown>;
      const names = Object.keys(mod);
      expect(names.some((n) => /^create[A-Z]\w*Channel$/.test(n) && typeof mod[n] === "function")).toBe(true);
      expect(names.some((n) => /^[A-Z]\w*Channel$/.test(n) && typeof mod[n] === "function")).toBe(true);
      expect(readFileSync(path.join(ROOT, "channels", dir, "types.ts"), "utf8")).toMatch(
        /export type \w+ChannelConfig\b/,
      );
    });
  }
});

describe("narrow dependencies (issue 10)", () => {
  // These folders name what they use: `Pick<Services, …>` (or their own deps type), never the bag.
  const narrow = ["src/policy", "src/delivery", "src/routing", "src/history", "src/cron"];
  for (const dir of narrow) {
    it(`${dir} takes a Pick<Services, …>, not the whole Services`, () => {
      const bad: string[] = [];
      for (const f of files(path.join(ROOT, dir))) {
        const code = readFileSync(f, "utf8")
          .replace(/^import[\s\S]*?from\s*["'][^"']+["'];/gm, "")
          .replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
        for (const m of code.matchAll(/(?<!Pick<\s*)\bServices\b.*/g))
          bad.push(`${path.relative(ROOT, f)}: ${m[0]}`);
      }
      expect(bad).toEqual([]);
    });
  }
});
