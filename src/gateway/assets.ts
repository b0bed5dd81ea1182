import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { FastifyInstance } from "fastify";

/**
 * Browser libraries the web chat and dashboard load from the gateway itself (no CDN): `marked`
 * renders Markdown and `DOMPurify` sanitises the HTML before it touches the page. Read once from
 * node_modules at start; served with a long cache lifetime (the paths carry no version, so a
 * week, not forever).
 */

const require = createRequire(import.meta.url);

/** Route → where the file is: marked's `exports` hides its UMD build, so it is found beside package.json. */
const FILES: Record<string, () => string> = {
  "/assets/marked.js": () =>
    path.join(path.dirname(require.resolve("marked/package.json")), "lib/marked.umd.js"),
  "/assets/purify.js": () => require.resolve("dompurify/dist/purify.min.js"),
};

export function registerAssets(app: FastifyInstance): void {
  for (const [route, locate] of Object.entries(FILES)) {
    let body: string | undefined;
    app.get(route, async (_req, reply) => {
      body ??= readFileSync(locate(), "utf8");
      void reply
        .type("text/javascript; charset=utf-8")
        .header("cache-control", "public, max-age=604800")
        .header("x-content-type-options", "nosniff");
      return body;
    });
  }
}
