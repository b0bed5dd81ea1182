import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * Folder boundaries (STYLE habit 1) checked by scanning imports: a folder is a boundary, and this
 * table says which folders may not import which. The composition root (src/app/) is the only
 * file that picks drivers and channels.
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

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1] ?? "");
  return specs
    .filter((s) => s.startsWith("."))
    .map((s) => path.relative(ROOT, path.resolve(path.dirname(file), s)));
}

const rules: Array<{ from: string; mustNotImport: string[]; except?: string[] }> = [
  { from: "src", mustNotImport: ["channels/"], except: ["src/app/"] },
  {
    from: "src/tools",
    mustNotImport: [
      "channels/",
      "src/pipeline/local",
      "src/pipeline/bullmq",
      "src/store/fs",
      "src/store/redis",
    ],
  },
  {
    from: "src/agent",
    mustNotImport: [
      "channels/",
      "src/store/fs",
      "src/store/redis",
      "src/pipeline/local",
      "src/pipeline/bullmq",
    ],
  },
  {
    from: "src/routing",
    mustNotImport: [
      "channels/",
      "src/store/fs",
      "src/store/redis",
      "src/pipeline/local",
      "src/pipeline/bullmq",
    ],
  },
  {
    from: "src/gateway",
    mustNotImport: [
      "channels/",
      "src/store/fs",
      "src/store/redis",
      "src/pipeline/local",
      "src/pipeline/bullmq",
    ],
  },
  { from: "src/delivery", mustNotImport: ["channels/", "src/store/fs", "src/store/redis"] },
  {
    from: "src/store/fs",
    mustNotImport: ["src/store/redis", "src/pipeline", "src/agent", "src/tools", "channels/"],
  },
  {
    from: "src/store/redis",
    mustNotImport: ["src/store/fs", "src/pipeline", "src/agent", "src/tools", "channels/"],
  },
  {
    from: "src/pipeline/local",
    mustNotImport: [
      "src/pipeline/bullmq",
      "src/store/fs",
      "src/store/redis",
      "src/agent",
      "src/tools",
      "channels/",
    ],
  },
  {
    from: "src/pipeline/bullmq",
    mustNotImport: [
      "src/pipeline/local",
      "src/store/fs",
      "src/store/redis",
      "src/agent",
      "src/tools",
      "channels/",
    ],
  },
  // Dependencies point down only (issue 10): lower layers never climb back up.
  { from: "src/log.ts", mustNotImport: ["src/tools"] },
  { from: "src/delivery", mustNotImport: ["src/tools"] },
  { from: "src/routing", mustNotImport: ["src/tools"] },
  { from: "src/store", mustNotImport: ["src/tools"] },
  { from: "src/tools", mustNotImport: ["src/agent"] },
  { from: "src/mcp", mustNotImport: ["src/cli"] },
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
  // config sits below the stores (a default both share lives in config/schema.ts)
  { from: "src/config", mustNotImport: ["src/store", "src/journal", "src/redis"] },
  ...["src/store", "src/journal", "src/redis"].map((from) => ({
    from,
    mustNotImport: [
      "src/sessions",
      "src/policy",
      "src/history",
      "src/routing",
      "src/tools",
      "src/flows",
      "src/agent",
    ],
  })),
  ...["src/policy", "src/history", "src/sessions"].map((from) => ({
    from,
    mustNotImport: ["src/routing", "src/delivery", "src/tools", "src/flows", "src/agent", "src/gateway"],
  })),
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
        for (const imp of importsOf(f)) {
          if (
            rule.mustNotImport.some(
              (p) => imp.startsWith(p.endsWith("/") ? p : `${p}/`) || imp.startsWith(`${p}.`),
            )
          ) {
            bad.push(`${rel} → ${imp}`);
          }
        }
      }
      expect(bad).toEqual([]);
    });
  }

  for (const dir of channelDirs) {
    it(`channels/${dir} imports only the channel contract, errors, log, delivery helpers and leaf utilities from src/`, () => {
      const allowed = [
        "src/channels/types",
        "src/channels/inbound-retry",
        "src/channels/kit",
        "src/retry",
        "src/ordered-set", // a leaf: bounded caches, imports nothing
        "src/errors",
        "src/log",
        "src/delivery/format",
        "src/delivery/chunk",
      ];
      const bad: string[] = [];
      for (const f of files(path.join(ROOT, "channels", dir))) {
        for (const imp of importsOf(f)) {
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
