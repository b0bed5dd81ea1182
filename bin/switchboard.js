#!/usr/bin/env node
// Thin launcher: the CLI is compiled to dist/ by `npm run build` (npm start builds first).
import { main } from "../dist/src/cli/main.js";

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === "number") process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`switchboard: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
