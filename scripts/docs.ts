/**
 * `npm run docs`: write docs/configuration.md and schema/switchboard.schema.json from the zod
 * schema. test/unit/config/reference.test.ts fails when either is stale.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { configJsonSchema, configReferenceMarkdown } from "../src/config/reference.js";

const root = path.resolve(import.meta.dirname, "..");
mkdirSync(path.join(root, "schema"), { recursive: true });
writeFileSync(
  path.join(root, "schema/switchboard.schema.json"),
  `${JSON.stringify(configJsonSchema(), null, 2)}\n`,
);
writeFileSync(path.join(root, "docs/configuration.md"), configReferenceMarkdown());
process.stdout.write("wrote docs/configuration.md and schema/switchboard.schema.json\n");
