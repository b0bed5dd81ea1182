import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  attachmentDigests,
  invalidNameReason,
  MANIFEST_NAME,
  sanitizeMountPath,
  strictBase64Size,
  validateAttachments,
  writeAttachments,
} from "../../../src/subagents/attachments.js";
import { tempDir } from "../../helpers.js";

const limits = { maxFiles: 3, maxFileBytes: 10, maxTotalBytes: 15 };
const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe("attachment names", () => {
  it.each([
    ["", "empty"],
    ["../x", "separator"],
    ["a/b", "separator"],
    ["a\\b", "separator"],
    ["nul\u0000", "control"],
    ["bell\u0007", "control"],
    ["c1\u0085", "control"],
    ["del\u007f", "control"],
    [".", "relative"],
    ["..", "relative"],
    [MANIFEST_NAME, "reserved"],
    ["x".repeat(256), "longer"],
    ["invoice\u202Etxt.exe", "bidirectional"],
    ["isolate\u2066x\u2069", "bidirectional"],
    ["mark\u200F.txt", "bidirectional"],
    ["zero\u200Bwidth", "invisible"],
    ["bom\uFEFF", "invisible"],
    ["line\u2028sep", "invisible"],
  ])("refuses %j", (name, why) => {
    expect(invalidNameReason(name)).toContain(why);
  });

  it("accepts ordinary names, dots inside and unicode", () => {
    for (const n of ["notes.txt", ".hidden", "a..b", "résumé.pdf", "x".repeat(255)])
      expect(invalidNameReason(n)).toBeNull();
  });
});

describe("strict base64", () => {
  it("measures valid input without decoding", () => {
    expect(strictBase64Size("aGVsbG8=")).toBe(5);
    expect(strictBase64Size("aGVsbG8h")).toBe(6);
    expect(strictBase64Size("aGk=")).toBe(2);
    expect(strictBase64Size("YQ==")).toBe(1);
    expect(strictBase64Size("")).toBe(0);
  });

  it.each([
    "abc",
    "ab=c",
    "a===",
    "!!!!",
    "aGVsbG8",
    "aGVsbG8-",
    "YQ==YQ==",
    "aGVs\nbG8h",
    "aGVs\r\nbG8h",
    "aGVs bG8h",
    " aGVsbG8h",
    "aGVsbG8h\n",
    "aGVs\tbG8h",
  ])("refuses %j", (s) => {
    expect(strictBase64Size(s)).toBeNull();
  });
});

describe("validateAttachments", () => {
  it("decodes utf8 and base64 and totals bytes", () => {
    const v = validateAttachments(
      [
        { name: "a.txt", content: "héllo" },
        { name: "b.bin", content: Buffer.from([1, 2, 3]).toString("base64"), encoding: "base64" },
      ],
      limits,
    );
    expect(v.ok).toBe(true);
    if (!v.ok) return;
    expect(v.totalBytes).toBe(6 + 3);
    expect([...(v.files[1]?.data ?? [])]).toEqual([1, 2, 3]);
  });

  it.each([
    ["attachments_file_count_exceeded", [1, 2, 3, 4].map((i) => ({ name: `f${i}`, content: "" }))],
    ["attachments_invalid_name", [{ name: "../etc/passwd", content: "x" }]],
    [
      "attachments_duplicate_name",
      [
        { name: "a", content: "1" },
        { name: "a", content: "2" },
      ],
    ],
    ["attachments_invalid_base64", [{ name: "a", content: "not base64!", encoding: "base64" as const }]],
    ["attachments_file_bytes_exceeded", [{ name: "a", content: "12345678901" }]],
    [
      "attachments_file_bytes_exceeded",
      [{ name: "a", content: Buffer.alloc(11).toString("base64"), encoding: "base64" as const }],
    ],
    [
      "attachments_total_bytes_exceeded",
      [
        { name: "a", content: "1234567890" },
        { name: "b", content: "123456" },
      ],
    ],
  ])("%s", (code, list) => {
    const v = validateAttachments(list, limits);
    expect(v.ok).toBe(false);
    if (v.ok) return;
    expect(v.code).toBe(code);
    expect(v.error.startsWith(code)).toBe(true);
  });

  it("measures utf8 in bytes, not characters", () => {
    const v = validateAttachments([{ name: "a", content: "ééééé6" }], limits); // 11 bytes
    expect(v.ok ? "ok" : v.code).toBe("attachments_file_bytes_exceeded");
  });
});

describe("writeAttachments", () => {
  it("writes private files, a manifest and sha256 receipts", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const ws = path.join(t.dir, "ws");
    const v = validateAttachments(
      [
        { name: "a.txt", content: "hello", mimeType: "text/plain" },
        { name: "b", content: "" },
      ],
      limits,
    );
    if (!v.ok) throw new Error(v.error);
    const w = await writeAttachments(ws, v.files);
    expect(w.receipt.relDir).toMatch(/^\.switchboard\/attachments\/[0-9a-f-]{36}$/);
    expect(w.absDir).toBe(path.join(ws, w.receipt.relDir));
    expect(statSync(w.absDir).mode & 0o777).toBe(0o700);
    expect(statSync(path.join(w.absDir, "a.txt")).mode & 0o777).toBe(0o600);
    expect(readFileSync(path.join(w.absDir, "a.txt"), "utf8")).toBe("hello");
    const sha = createHash("sha256").update("hello").digest("hex");
    expect(w.receipt).toEqual({
      count: 2,
      totalBytes: 5,
      relDir: w.receipt.relDir,
      files: [
        { name: "a.txt", bytes: 5, sha256: sha },
        { name: "b", bytes: 0, sha256: createHash("sha256").update("").digest("hex") },
      ],
    });
    const manifest = JSON.parse(readFileSync(path.join(w.absDir, MANIFEST_NAME), "utf8"));
    expect(manifest.files[0]).toEqual({ name: "a.txt", bytes: 5, sha256: sha, mimeType: "text/plain" });
    expect(manifest.relDir).toBe(w.receipt.relDir);
  });

  it("remove() undoes only what it created and keeps other spawns' folders", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const ws = path.join(t.dir, "ws");
    const v = validateAttachments([{ name: "a", content: "1" }], limits);
    if (!v.ok) throw new Error(v.error);
    const first = await writeAttachments(ws, v.files);
    const second = await writeAttachments(ws, v.files);
    await second.remove();
    expect(existsSync(second.absDir)).toBe(false);
    expect(existsSync(first.absDir)).toBe(true);
    await first.remove();
    expect(existsSync(ws)).toBe(false);
    expect(readdirSync(t.dir)).toEqual([]);
  });
});

describe("hostile attachments", () => {
  it("case-insensitive duplicates are refused with the duplicate code", () => {
    const v = validateAttachments(
      [
        { name: "A.txt", content: "1" },
        { name: "a.TXT", content: "2" },
      ],
      limits,
    );
    expect(v).toMatchObject({ ok: false, code: "attachments_duplicate_name" });
  });

  it("a bidi-control name and base64 with embedded newlines are refused with their codes", () => {
    expect(validateAttachments([{ name: "a\u202Egnp.exe", content: "x" }], limits)).toMatchObject({
      ok: false,
      code: "attachments_invalid_name",
    });
    expect(
      validateAttachments([{ name: "b.bin", content: "aGVs\nbG8h", encoding: "base64" }], limits),
    ).toMatchObject({ ok: false, code: "attachments_invalid_base64" });
  });

  it("never writes through a symlinked .switchboard or attachments folder", async () => {
    for (const link of [".switchboard", path.join(".switchboard", "attachments")]) {
      const ws = tempDir();
      const outside = tempDir();
      cleanups.push(ws.cleanup, outside.cleanup);
      const linkPath = path.join(ws.dir, link);
      mkdirSync(path.dirname(linkPath), { recursive: true });
      symlinkSync(outside.dir, linkPath);
      await expect(
        writeAttachments(ws.dir, [{ name: "x.txt", data: Buffer.from("secret") }]),
      ).rejects.toThrow(/link/);
      expect(readdirSync(outside.dir)).toEqual([]);
    }
  });

  it("the transcript copy carries { name, bytes, sha256 } instead of the content", () => {
    const sha = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");
    expect(
      attachmentDigests({
        task: "t",
        attachments: [
          { name: "n.txt", content: "SECRET-CONTENT" },
          { name: "b.bin", content: "aGVsbG8=", encoding: "base64" },
        ],
      }),
    ).toEqual({
      task: "t",
      attachments: [
        { name: "n.txt", bytes: 14, sha256: sha("SECRET-CONTENT") },
        { name: "b.bin", bytes: 5, sha256: sha("hello") },
      ],
    });
  });
});

describe("sanitizeMountPath", () => {
  it("keeps a small alphabet and drops control characters", () => {
    expect(sanitizeMountPath("/mnt/in put\n;rm -rf")).toBe("/mnt/inputrm-rf");
    expect(sanitizeMountPath("\u0000")).toBeUndefined();
    expect(sanitizeMountPath(undefined)).toBeUndefined();
  });
});
