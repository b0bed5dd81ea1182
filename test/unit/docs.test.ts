import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import JSON5 from "json5";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { configJsonSchema, configReferenceMarkdown } from "../../src/config/reference.js";

/** The repository's Markdown: links resolve inside the repo, config examples run as shown, the generated reference is fresh. */

const ROOT = path.resolve(import.meta.dirname, "../..");
const SKIP = new Set(["node_modules", "dist", ".git", ".switchboard", "coverage"]);

function markdownFiles(dir: string, depth = 0): string[] {
  if (depth > 6) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...markdownFiles(p, depth + 1));
    else if (name.endsWith(".md")) out.push(p);
  }
  return out;
}

/** GitHub's heading anchors: lower-case, punctuation dropped, spaces to dashes. */
function anchors(file: string): Set<string> {
  const text = readFileSync(file, "utf8").replace(/```[\s\S]*?```/g, "");
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6}\s+(.+)$/gm))
    out.add(
      (m[1] ?? "")
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, "")
        .replace(/\s/g, "-"),
    );
  return out;
}

function links(file: string): string[] {
  const text = readFileSync(file, "utf8").replace(/```[\s\S]*?```/g, "");
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1] ?? "");
}

function json5Blocks(file: string): Array<{ line: number; text: string }> {
  const text = readFileSync(file, "utf8");
  const out: Array<{ line: number; text: string }> = [];
  for (const m of text.matchAll(/^```json5\n([\s\S]*?)^```/gm))
    out.push({ line: text.slice(0, m.index).split("\n").length, text: m[1] ?? "" });
  return out;
}

/** Every `${VAR}` an example names is set, as a user following it would have. */
const exampleEnv = new Proxy({} as NodeJS.ProcessEnv, {
  get: (_t, name) => (typeof name === "string" ? `example-${name.toLowerCase()}-value` : undefined),
});

const files = markdownFiles(ROOT);

describe("Markdown in the repository", () => {
  it("finds the docs it is meant to check", () => {
    const rel = files.map((f) => path.relative(ROOT, f));
    for (const f of [
      "README.md",
      "CONTRIBUTING.md",
      "docs/configuration.md",
      "docs/api.md",
      "docs/session-tools.md",
      "docs/architecture.md",
      "docs/operations.md",
      "docs/security.md",
      "channels/telegram/README.md",
    ])
      expect(rel).toContain(f);
  });

  it("every relative link resolves to a file (and heading) inside the repository", () => {
    const broken: string[] = [];
    for (const file of files) {
      for (const link of links(file)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // http:, https:, mailto:
        const [target = "", anchor] = link.split("#");
        const resolved = target ? path.resolve(path.dirname(file), target) : file;
        const where = `${path.relative(ROOT, file)}: ${link}`;
        if (!resolved.startsWith(`${ROOT}${path.sep}`) || !existsSync(resolved)) broken.push(where);
        else if (anchor && resolved.endsWith(".md") && !anchors(resolved).has(anchor))
          broken.push(`${where} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("every JSON5 example is a whole config file that validates", () => {
    const checked: string[] = [];
    const failures: string[] = [];
    const examples = files.filter((f) => {
      const rel = path.relative(ROOT, f);
      return (
        rel === "README.md" || rel.startsWith(`docs${path.sep}`) || /^channels\/[^/]+\/README\.md$/.test(rel)
      );
    });
    for (const file of examples) {
      for (const block of json5Blocks(file)) {
        const where = `${path.relative(ROOT, file)}:${block.line}`;
        checked.push(where);
        try {
          parseConfig(JSON5.parse(block.text), exampleEnv);
        } catch (err) {
          failures.push(`${where}: ${(err as Error).message}`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(checked.length).toBeGreaterThanOrEqual(8);
  });

  it("the minimal real-model example in the README needs only OPENAI_API_KEY", () => {
    const readme = path.join(ROOT, "README.md");
    const minimal = json5Blocks(readme).find((b) => b.text.includes('default: "openai/'));
    expect(minimal).toBeDefined();
    const vars = [...(minimal?.text ?? "").matchAll(/\$\{([A-Z0-9_]+)\}/g)].map((m) => m[1]);
    expect(new Set(vars)).toEqual(new Set(["OPENAI_API_KEY"]));
    const config = parseConfig(JSON5.parse(minimal?.text ?? ""), { OPENAI_API_KEY: "sk-test" });
    expect(config.models.default).toMatch(/^openai\//);
  });

  it("docs/configuration.md and schema/switchboard.schema.json match the schema (run `npm run docs`)", () => {
    const md = readFileSync(path.join(ROOT, "docs/configuration.md"), "utf8");
    const json = readFileSync(path.join(ROOT, "schema/switchboard.schema.json"), "utf8");
    expect(md, "docs/configuration.md is stale: run `npm run docs`").toBe(configReferenceMarkdown());
    expect(json, "schema/switchboard.schema.json is stale: run `npm run docs`").toBe(
      `${JSON.stringify(configJsonSchema(), null, 2)}\n`,
    );
  });
});
