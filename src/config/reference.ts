import { z } from "zod";
import { CONFIG_DESCRIPTIONS } from "./descriptions.js";
import { configSchema } from "./schema.js";

/**
 * The config file's JSON Schema (for editors) and its Markdown reference (docs/configuration.md),
 * both derived from the zod schema. `npm run docs` writes them; a test fails when they are stale.
 */

type Json = Record<string, unknown>;

/** Placeholder for the keys of a record, by the record's path. */
const RECORD_KEYS: Record<string, string> = {
  "models.providers": "<provider>",
  "models.providers.<provider>.models": "<model>",
  "session.identityLinks": "<peer>",
};

function recordKey(path: string): string {
  if (RECORD_KEYS[path]) return RECORD_KEYS[path];
  if (path.endsWith(".accounts")) return "<account>";
  return "<name>";
}

/** Attach descriptions (the schema's own, else CONFIG_DESCRIPTIONS) to every node, by path. */
function describe(node: Json, path: string): void {
  const text = CONFIG_DESCRIPTIONS[path];
  if (text && typeof node.description !== "string") node.description = text;
  const props = node.properties as Record<string, Json> | undefined;
  if (props) for (const [k, v] of Object.entries(props)) describe(v, path ? `${path}.${k}` : k);
  const extra = node.additionalProperties;
  if (extra && typeof extra === "object") describe(extra as Json, `${path}.${recordKey(path)}`);
  if (node.items && typeof node.items === "object") describe(node.items as Json, `${path}[]`);
  for (const key of ["anyOf", "oneOf"] as const) {
    const variants = node[key] as Json[] | undefined;
    if (variants) for (const v of variants) describe(v, path);
  }
}

export function configJsonSchema(): Json {
  const schema = z.toJSONSchema(configSchema, { io: "input", unrepresentable: "any" }) as Json;
  describe(schema, "");
  return {
    $schema: schema.$schema,
    $id: "https://switchboard.invalid/schema/switchboard.schema.json",
    title: "Switchboard config file (switchboard.json5)",
    ...Object.fromEntries(Object.entries(schema).filter(([k]) => k !== "$schema")),
  };
}

interface Row {
  path: string;
  type: string;
  def: string;
  description: string;
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function typeOf(node: Json): string {
  if (node.const !== undefined) return JSON.stringify(node.const);
  if (Array.isArray(node.enum)) return node.enum.map((v) => JSON.stringify(v)).join(" | ");
  const variants = (node.anyOf ?? node.oneOf) as Json[] | undefined;
  if (variants) return variants.map(typeOf).join(" | ");
  const t = node.type;
  if (t === "array") {
    const items = (node.items ?? {}) as Json;
    return `${items.properties ? "object" : typeOf(items)}[]`;
  }
  if (t === "integer" || t === "number") {
    const min = node.minimum as number | undefined;
    const gt = node.exclusiveMinimum as number | undefined;
    const max = node.maximum === MAX_SAFE ? undefined : (node.maximum as number | undefined);
    if (min !== undefined && max !== undefined) return `${t} ${min}..${max}`;
    const lower = min !== undefined ? `≥ ${min}` : gt !== undefined ? `> ${gt}` : "";
    const upper = max !== undefined ? `≤ ${max}` : "";
    return [t, lower, upper].filter(Boolean).join(" ");
  }
  if (t === "string") return node.format === "uri" ? "URL" : "string";
  if (typeof t === "string") return t;
  return "any";
}

function leaf(node: Json): boolean {
  if (node.properties) return false;
  if (node.additionalProperties && typeof node.additionalProperties === "object") return false;
  const variants = (node.anyOf ?? node.oneOf) as Json[] | undefined;
  if (variants?.some((v) => v.properties)) return false;
  return true;
}

function rows(node: Json, path: string, out: Row[]): void {
  const description = typeof node.description === "string" ? node.description : "";
  if (leaf(node) || (node.type === "array" && (node.items as Json | undefined)?.properties)) {
    if (path)
      out.push({
        path,
        type: typeOf(node),
        def: node.default === undefined ? "" : `\`${JSON.stringify(node.default)}\``,
        description,
      });
    const items = node.items as Json | undefined;
    if (node.type === "array" && items?.properties) rows(items, `${path}[]`, out);
    return;
  }
  const props = node.properties as Record<string, Json> | undefined;
  if (props) for (const [k, v] of Object.entries(props)) rows(v, path ? `${path}.${k}` : k, out);
  const extra = node.additionalProperties;
  if (extra && typeof extra === "object") {
    if (description) out.push({ path, type: "map", def: "", description });
    rows(extra as Json, `${path}.${recordKey(path)}`, out);
  }
  const variants = (node.anyOf ?? node.oneOf) as Json[] | undefined;
  if (variants) mergeVariants(variants, path, out);
}

/** A discriminated union (providers by `kind`): one row per path, saying which kinds have it. */
function mergeVariants(variants: Json[], path: string, out: Row[]): void {
  const byPath = new Map<string, { row: Row; types: Set<string>; kinds: string[] }>();
  for (const v of variants) {
    const kind =
      ((v.properties as Record<string, Json> | undefined)?.kind?.const as string | undefined) ?? "";
    const mine: Row[] = [];
    rows(v, path, mine);
    for (const r of mine) {
      const seen = byPath.get(r.path);
      if (seen) {
        seen.types.add(r.type);
        seen.kinds.push(kind);
      } else byPath.set(r.path, { row: r, types: new Set([r.type]), kinds: [kind] });
    }
  }
  for (const { row, types, kinds } of byPath.values()) {
    const partial = kinds.length < variants.length && kinds.every(Boolean);
    out.push({
      ...row,
      type: [...types].join(" | "),
      description: partial ? `${row.description} (kind ${kinds.join(", ")})`.trim() : row.description,
    });
  }
}

function cell(s: string): string {
  return s.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

/** Prose cells: also keep `<name>` placeholders from being read as HTML. */
function prose(s: string): string {
  return cell(s).replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

export function configReferenceMarkdown(): string {
  const schema = configJsonSchema();
  const top = schema.properties as Record<string, Json>;
  const lines = [
    "# Configuration reference",
    "",
    "<!-- Generated by `npm run docs` from src/config/schema.ts and src/config/descriptions.ts. Do not edit by hand. -->",
    "",
    "One JSON5 file: `--config FILE`, else `$SWITCHBOARD_CONFIG`, else `./switchboard.json5` if it exists,",
    "else the built-in defaults. `${VAR}` in any string is replaced from the environment (a missing",
    "variable is an error). Unknown keys are errors, and every error names its path, for example",
    "`config: gateway.port: Too big: expected number to be <=65535`. Relative paths resolve against the",
    "config file's directory.",
    "",
    "Editors can complete and check the file with the JSON Schema in",
    "[schema/switchboard.schema.json](../schema/switchboard.schema.json): add",
    '`"$schema": "./node_modules/switchboard/schema/switchboard.schema.json"` (or a path to your',
    "checkout) as the first key. In the tables, `<provider>`, `<account>` and `<name>` stand for",
    "names you choose, and `[]` for each element of a list.",
    "",
  ];
  const scalars: Row[] = [];
  const sections: Array<[string, Json]> = [];
  for (const [key, node] of Object.entries(top)) {
    if (key === "$schema") continue;
    const listOfObjects = node.type === "array" && (node.items as Json | undefined)?.properties;
    if (leaf(node) && !listOfObjects) rows(node, key, scalars);
    else sections.push([key, node]);
  }
  const table = (out: Row[]) => {
    lines.push("| key | type | default | description |", "| --- | --- | --- | --- |");
    for (const r of out)
      lines.push(`| \`${cell(r.path)}\` | ${prose(r.type)} | ${cell(r.def)} | ${prose(r.description)} |`);
    lines.push("");
  };
  lines.push("## Top level", "");
  table(scalars);
  for (const [key, node] of sections) {
    const out: Row[] = [];
    rows(node, key, out);
    lines.push(`## ${key}`, "");
    if (typeof node.description === "string") lines.push(node.description, "");
    table(out);
  }
  return `${lines.join("\n").trimEnd()}\n`;
}
