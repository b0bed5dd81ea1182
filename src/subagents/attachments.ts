import { createHash, randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { chmod, lstat, mkdir, open, realpath, rm, rmdir } from "node:fs/promises";
import path from "node:path";

/**
 * `sessions_spawn` attachments (SEMANTICS §3): validation is pure and complete before anything
 * touches the disk, so a rejected spawn leaves nothing behind; materialisation writes one private
 * folder per spawn (`<workspace>/.switchboard/attachments/<uuid>/`, mode 0700, files 0600) with a
 * `.manifest.json`, and removes whatever it created when a write fails.
 */

export const ATTACHMENTS_SUBDIR = path.join(".switchboard", "attachments");
export const MANIFEST_NAME = ".manifest.json";
/** Longest file name in bytes most file systems accept. */
const MAX_NAME_BYTES = 255;

export interface AttachmentInput {
  name: string;
  content: string;
  encoding?: "utf8" | "base64";
  mimeType?: string;
}

export interface AttachmentLimits {
  maxFiles: number;
  maxFileBytes: number;
  maxTotalBytes: number;
}

export type AttachmentErrorCode =
  | "attachments_invalid_name"
  | "attachments_duplicate_name"
  | "attachments_invalid_base64"
  | "attachments_file_bytes_exceeded"
  | "attachments_total_bytes_exceeded"
  | "attachments_file_count_exceeded";

export interface DecodedAttachment {
  name: string;
  data: Buffer;
  mimeType?: string;
}

export type AttachmentValidation =
  | { ok: true; files: DecodedAttachment[]; totalBytes: number }
  | { ok: false; code: AttachmentErrorCode; error: string };

export interface AttachmentReceipt {
  count: number;
  totalBytes: number;
  /** Relative to the child's workspace. */
  relDir: string;
  files: Array<{ name: string; bytes: number; sha256: string }>;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: C0, DEL and C1 control characters are what is refused
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;
/** Invisible format characters: bidi overrides (U+202E…), isolates, zero-width, BOM; line/paragraph separators. */
const FORMAT_RE = /[\p{Cf}\u2028\u2029]/u;
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Why `name` cannot be a file name in the attachment folder, or null when it can. */
export function invalidNameReason(name: string): string | null {
  if (name.length === 0) return "empty name";
  if (name.includes("/") || name.includes("\\")) return "contains a path separator";
  if (CONTROL_RE.test(name)) return "contains a control character";
  if (FORMAT_RE.test(name)) return "contains an invisible or bidirectional control character";
  if (name === "." || name === "..") return "is a relative path component";
  if (name === MANIFEST_NAME) return `${MANIFEST_NAME} is reserved`;
  if (Buffer.byteLength(name, "utf8") > MAX_NAME_BYTES) return `longer than ${MAX_NAME_BYTES} bytes`;
  return null;
}

/**
 * Strict base64 (SEMANTICS §3): only the standard alphabet — no whitespace or line wrapping —, a
 * length that is a multiple of 4 and at most two `=` at the end. Returns the decoded size without
 * decoding.
 */
export function strictBase64Size(content: string): number | null {
  const s = content;
  if (s.length % 4 !== 0 || !BASE64_RE.test(s)) return null;
  const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
  return (s.length / 4) * 3 - pad;
}

function fail(code: AttachmentErrorCode, error: string): AttachmentValidation {
  return { ok: false, code, error: `${code}: ${error}` };
}

/** Checks every rule and decodes; the first violation wins, in list order. */
export function validateAttachments(
  list: readonly AttachmentInput[],
  limits: AttachmentLimits,
): AttachmentValidation {
  if (list.length > limits.maxFiles) {
    return fail(
      "attachments_file_count_exceeded",
      `${list.length} files > maxFiles ${limits.maxFiles} (tools.sessions_spawn.attachments.maxFiles)`,
    );
  }
  const seen = new Set<string>();
  const files: DecodedAttachment[] = [];
  let total = 0;
  for (const [i, a] of list.entries()) {
    const why = invalidNameReason(a.name);
    if (why)
      return fail("attachments_invalid_name", `attachments.${i}.name ${JSON.stringify(a.name)}: ${why}`);
    // Case-insensitive file systems (macOS, Windows) would make A.txt and a.txt one file.
    const folded = a.name.normalize("NFC").toLowerCase();
    if (seen.has(folded))
      return fail(
        "attachments_duplicate_name",
        `attachments.${i}.name ${JSON.stringify(a.name)} is used twice (names are compared without case)`,
      );
    seen.add(folded);
    let bytes: number;
    if (a.encoding === "base64") {
      const size = strictBase64Size(a.content);
      if (size === null)
        return fail("attachments_invalid_base64", `attachments.${i} (${a.name}) is not valid base64`);
      bytes = size;
    } else {
      bytes = Buffer.byteLength(a.content, "utf8");
    }
    if (bytes > limits.maxFileBytes) {
      return fail(
        "attachments_file_bytes_exceeded",
        `${a.name} is ${bytes} bytes > maxFileBytes ${limits.maxFileBytes} (tools.sessions_spawn.attachments.maxFileBytes)`,
      );
    }
    total += bytes;
    if (total > limits.maxTotalBytes) {
      return fail(
        "attachments_total_bytes_exceeded",
        `${total} bytes in total > maxTotalBytes ${limits.maxTotalBytes} (tools.sessions_spawn.attachments.maxTotalBytes)`,
      );
    }
    // Decoded only after the size checks, so an oversized payload is never allocated twice.
    const data = a.encoding === "base64" ? Buffer.from(a.content, "base64") : Buffer.from(a.content, "utf8");
    files.push({ name: a.name, data, ...(a.mimeType ? { mimeType: a.mimeType } : {}) });
  }
  return { ok: true, files, totalBytes: total };
}

/** A `mountPath` hint safe to show the child: no control characters, a small alphabet, bounded. */
export function sanitizeMountPath(p: string | undefined): string | undefined {
  if (p === undefined) return undefined;
  const clean = p.replace(/[^A-Za-z0-9._\-/:]/g, "").slice(0, 200);
  return clean === "" ? undefined : clean;
}

/** Creates `file` exclusively (0600) without following a link in its place (O_NOFOLLOW). */
async function writeNoFollow(file: string, data: Buffer | string): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const fh = await open(file, flags, 0o600);
  try {
    await fh.writeFile(data);
  } finally {
    await fh.close();
  }
}

/** Throws when an existing component of `rel` under `base` is a symbolic link (or not a directory). */
async function refuseLinks(base: string, rel: string): Promise<void> {
  let dir = base;
  for (const part of rel.split(path.sep)) {
    dir = path.join(dir, part);
    let st: Awaited<ReturnType<typeof lstat>>;
    try {
      st = await lstat(dir);
    } catch {
      return; // missing from here on: mkdir creates real directories
    }
    if (st.isSymbolicLink() || !st.isDirectory())
      throw new Error(`${dir} is a link or not a directory; attachments are written only into real folders`);
  }
}

/**
 * The spawn arguments as they may enter the caller's transcript: each attachment becomes
 * `{ name, bytes, sha256 }` of its decoded content (SEMANTICS §3: contents never go there).
 */
export function attachmentDigests(args: unknown): unknown {
  if (!args || typeof args !== "object" || Array.isArray(args)) return args;
  const a = args as Record<string, unknown>;
  if (!Array.isArray(a.attachments)) return args;
  return {
    ...a,
    attachments: a.attachments.map((x: unknown) => {
      const item = x && typeof x === "object" ? (x as Record<string, unknown>) : {};
      const name = typeof item.name === "string" ? item.name : "";
      const content = typeof item.content === "string" ? item.content : "";
      const data =
        item.encoding === "base64" && strictBase64Size(content) !== null
          ? Buffer.from(content, "base64")
          : Buffer.from(content, "utf8");
      return { name, bytes: data.length, sha256: createHash("sha256").update(data).digest("hex") };
    }),
  };
}

export interface WrittenAttachments {
  receipt: AttachmentReceipt;
  /** Absolute folder holding the files. */
  absDir: string;
  /** Removes everything this write created (used when the spawn fails later). */
  remove(): Promise<void>;
}

/**
 * Writes validated files under `workspaceDir`. On any failure everything created here is removed
 * before the error propagates. The returned `remove` does the same after a later failure.
 */
export async function writeAttachments(
  workspaceDir: string,
  files: readonly DecodedAttachment[],
): Promise<WrittenAttachments> {
  const uuid = randomUUID();
  const relDir = path.join(ATTACHMENTS_SUBDIR, uuid);
  const absDir = path.join(workspaceDir, relDir);
  // A link anywhere under the workspace (.switchboard, attachments) could point the write elsewhere.
  await refuseLinks(workspaceDir, ATTACHMENTS_SUBDIR);
  // mkdir returns the first directory it created. Undoing removes our folder, then each parent we
  // created only while it is empty (rmdir), so a concurrent spawn's files are never touched.
  const firstCreated = await mkdir(absDir, { recursive: true, mode: 0o700 });
  const remove = async () => {
    await rm(absDir, { recursive: true, force: true });
    if (!firstCreated) return;
    for (let dir = path.dirname(absDir); dir.length >= firstCreated.length; dir = path.dirname(dir)) {
      try {
        await rmdir(dir);
      } catch {
        return; // not empty (someone else's files) or already gone
      }
      if (dir === firstCreated) return;
    }
  };
  try {
    // The folder actually created must lie inside the workspace (a link swapped in meanwhile fails here).
    const [realWorkspace, realDir] = await Promise.all([realpath(workspaceDir), realpath(absDir)]);
    if (!realDir.startsWith(realWorkspace + path.sep))
      throw new Error(`attachment folder ${absDir} resolves outside the workspace (${realDir})`);
    await chmod(absDir, 0o700);
    const receipt: AttachmentReceipt = { count: files.length, totalBytes: 0, relDir, files: [] };
    for (const f of files) {
      await writeNoFollow(path.join(absDir, f.name), f.data);
      const sha256 = createHash("sha256").update(f.data).digest("hex");
      receipt.files.push({ name: f.name, bytes: f.data.length, sha256 });
      receipt.totalBytes += f.data.length;
    }
    const manifest = {
      ...receipt,
      files: receipt.files.map((r, i) => ({
        ...r,
        ...(files[i]?.mimeType ? { mimeType: files[i]?.mimeType } : {}),
      })),
    };
    await writeNoFollow(path.join(absDir, MANIFEST_NAME), `${JSON.stringify(manifest, null, 2)}\n`);
    return { receipt, absDir, remove };
  } catch (err) {
    await remove().catch(() => {});
    throw err;
  }
}
