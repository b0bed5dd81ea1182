import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createMediaStore } from "../../../src/app/media.js";
import { parseConfig } from "../../../src/config/index.js";
import { FsMediaStore } from "../../../src/media/fs/store.js";
import { S3MediaStore } from "../../../src/media/s3/store.js";
import { tempDir } from "../../helpers.js";

/**
 * Start-up does not load what only some set-ups use: `@aws-sdk/client-s3` (~120 ms, ~25 MB) only
 * with `media.store.driver: s3`, `file-type` only when a file is first stored.
 */

const root = path.resolve(import.meta.dirname, "../../../src");
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = path.join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith(".ts") ? [p] : [];
  });
}

describe("heavy optional packages are imported on first use", () => {
  it("the S3 store and file-type are imported dynamically only", () => {
    const staticUsers: string[] = [];
    for (const f of sources(root)) {
      const text = readFileSync(f, "utf8");
      const rel = path.relative(root, f);
      if (
        /^import\s[^;]*from\s+["'](file-type|[./]*\/?s3\/store\.js|\.\.\/media\/s3\/store\.js)["']/m.test(
          text,
        )
      )
        staticUsers.push(rel);
      if (rel !== "media/s3/store.ts" && /from\s+["']@aws-sdk\//.test(text)) staticUsers.push(rel);
    }
    expect(staticUsers).toEqual([]);
  });

  it("createMediaStore still builds the store the config names", async () => {
    const t = tempDir();
    try {
      const fsCfg = parseConfig({ stateDir: t.dir });
      expect(await createMediaStore(fsCfg, t.dir, t.dir)).toBeInstanceOf(FsMediaStore);
      const s3Cfg = parseConfig({
        stateDir: t.dir,
        media: { store: { driver: "s3", s3: { bucket: "b", endpoint: "http://127.0.0.1:9" } } },
      });
      expect(await createMediaStore(s3Cfg, t.dir, t.dir)).toBeInstanceOf(S3MediaStore);
    } finally {
      t.cleanup();
    }
  });
});
