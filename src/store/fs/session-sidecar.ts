/**
 * The session index's sidecar, `sessions/index.snapshot.idx`: the index fields of every entry
 * of `index.snapshot.jsonl`, in the snapshot's order, as columns (numbers as typed arrays,
 * strings "\0"-joined). Opening a store reads it instead of scanning every line of the
 * snapshot: at a million sessions the snapshot is ~500 MB of JSON and the scan most of the
 * start-up, while the sidecar is ~85 MB that decode without looking at JSON.
 *
 * It is derived data and never trusted blindly: its header names the snapshot it was written
 * for (its S, its size, a hash of its last 64 KiB) and how many entries it holds; its blocks
 * must add up to exactly that and the file must end where the last block does. Anything else
 * — missing, stale, torn, another byte order — and the caller scans the snapshot as before, so
 * a sidecar can make an open faster but never different. It is written after each snapshot is
 * in place (temp file, fsync, rename), in blocks between other work; a string holding "\0"
 * (which the format cannot carry) means no sidecar for that snapshot.
 *
 *   {"$sidecar":1,"snapshot":S,"bytes":B,"tail":"<sha1>","first":F,"entries":N,"endian":"LE"}\n
 *   then per block: {"n":n,"a":[agentIds],"k":K,"l":L,"s":P,"d":D}\n
 *                   updatedAt f64 ×n · sessionId hash i32 ×n · line length u32 ×n ·
 *                   agent (index into "a") u16 ×n · flags u8 ×n (1 archived, 2 label,
 *                   4 spawnedBy, 8 displayName) · keys (K bytes) · labels (L) · parents (P) ·
 *                   display names (D), each column "\0"-joined UTF-8 of the entries that have it
 *
 * Line offsets are not stored: snapshot lines are contiguous, so entry i+1 starts one byte
 * (the newline) after entry i ends, from F on; the last must end at B.
 */
import { createHash } from "node:crypto";
import { type FileHandle, open, rename, unlink } from "node:fs/promises";
import os from "node:os";
import { errorMessage } from "../../errors.js";
import { FILE_MODE } from "../../journal/fsutil.js";
import type { IndexedSession, IndexFields } from "./session-index.js";

/** The snapshot a sidecar belongs to. */
export interface SnapshotFacts {
  file: string;
  /** Its `{"$snapshot":S}`. */
  gen: number;
  /** Its size in bytes. */
  bytes: number;
}

/** Receives one entry of a sidecar: its index fields, then where its line is in the snapshot. */
export type SidecarEntry = (...entry: [...IndexFields, off: number, len: number]) => void;

const VERSION = 1;
const ENDIAN = os.endianness();
/** Entries per block: the writer yields to the event loop between blocks. */
const BLOCK_ENTRIES = 20_000;
/** An entry's fixed columns: updatedAt f64, sid i32, line length u32, agent u16, flags u8. */
const ENTRY_BYTES = 8 + 4 + 4 + 2 + 1;
const TAIL_BYTES = 64 * 1024;
const SEP = "\0";

const ARCHIVED = 1;
const LABEL = 2;
const SPAWNED = 4;
const DISPLAY = 8;
/** Writer only, never stored: a string the format cannot carry. */
const BAD = 128;

export function sidecarPath(snapshotFile: string): string {
  return snapshotFile.replace(/\.jsonl$/, ".idx");
}

/** sha1 of the snapshot's last 64 KiB: a snapshot with the same S and size but other bytes is not ours. */
async function tailHash(file: string, bytes: number): Promise<string> {
  const fh = await open(file, "r");
  try {
    const len = Math.min(TAIL_BYTES, bytes);
    const buf = Buffer.allocUnsafe(len);
    await readFully(fh, buf, len, bytes - len);
    return createHash("sha1").update(buf).digest("hex");
  } finally {
    await fh.close();
  }
}

/** A snapshot's records in order, and where their lines are. */
export interface SnapshotLines {
  refs: readonly IndexedSession[];
  /** Offset of the first record's line. */
  first: number;
  /** Bytes of record i's line, without its newline (the next line starts one byte after it). */
  length: (i: number) => number;
}

/**
 * Writes the sidecar of a snapshot in place. Resolves true once it is renamed into place, false
 * when it was given up (`stop()` turned true, or a string holds "\0"); a failed write rejects.
 * Either way no temp file stays behind.
 */
export async function writeSidecar(
  snap: SnapshotFacts,
  lines: SnapshotLines,
  stop: () => boolean,
): Promise<boolean> {
  const { refs } = lines;
  const file = sidecarPath(snap.file);
  const tmp = `${file}.tmp`;
  await unlink(file).catch(() => {}); // the older snapshot's: no use any more, whatever happens next
  const header = {
    $sidecar: VERSION,
    snapshot: snap.gen,
    bytes: snap.bytes,
    tail: await tailHash(snap.file, snap.bytes),
    first: lines.first,
    entries: refs.length,
    endian: ENDIAN,
  };
  const fh = await open(tmp, "w", FILE_MODE);
  let done = false;
  try {
    await fh.write(`${JSON.stringify(header)}\n`);
    for (let i = 0; i < refs.length; i += BLOCK_ENTRIES) {
      if (stop()) return false;
      const block = encodeBlock(lines, i, Math.min(refs.length, i + BLOCK_ENTRIES));
      if (block === null) return false;
      for (const part of block) await fh.write(part);
    }
    await fh.sync();
    done = true;
  } finally {
    await fh.close();
    if (!done) await unlink(tmp).catch(() => {});
  }
  if (stop()) {
    await unlink(tmp).catch(() => {});
    return false;
  }
  await rename(tmp, file);
  return true;
}

/** Adds `value` to a string column; false when it holds the separator (the format cannot carry it). */
function put(column: string[], value: string): boolean {
  if (value.includes(SEP)) return false;
  column.push(value);
  return true;
}

function encodeBlock({ refs, length }: SnapshotLines, from: number, to: number): Buffer[] | null {
  const n = to - from;
  const updated = new Float64Array(n);
  const sid = new Int32Array(n);
  const len = new Uint32Array(n);
  const agent = new Uint16Array(n);
  const flags = new Uint8Array(n);
  const agents: string[] = [];
  const agentIndex = new Map<string, number>();
  const keys: string[] = [];
  const labels: string[] = [];
  const parents: string[] = [];
  const names: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = refs[from + i]!;
    updated[i] = r.updatedAt;
    sid[i] = r.sid;
    len[i] = length(from + i);
    let a = agentIndex.get(r.agentId);
    if (a === undefined) {
      a = agents.length;
      agents.push(r.agentId);
      agentIndex.set(r.agentId, a);
    }
    agent[i] = a;
    let f = r.archived ? ARCHIVED : 0;
    if (!put(keys, r.key)) return null;
    if (r.label !== undefined) f |= put(labels, r.label) ? LABEL : BAD;
    if (r.spawnedBy !== undefined) f |= put(parents, r.spawnedBy) ? SPAWNED : BAD;
    if (r.displayName !== undefined) f |= put(names, r.displayName) ? DISPLAY : BAD;
    if (f & BAD) return null;
    flags[i] = f;
  }
  const strings = [keys, labels, parents, names].map((c) => Buffer.from(c.join(SEP), "utf8"));
  const head = {
    n,
    a: agents,
    k: strings[0]!.length,
    l: strings[1]!.length,
    s: strings[2]!.length,
    d: strings[3]!.length,
  };
  return [
    Buffer.from(`${JSON.stringify(head)}\n`),
    Buffer.from(updated.buffer),
    Buffer.from(sid.buffer),
    Buffer.from(len.buffer),
    Buffer.from(agent.buffer),
    Buffer.from(flags.buffer),
    ...strings,
  ];
}

/** What a block's header line says. */
interface BlockHead {
  n: number;
  agents: string[];
  /** Bytes of the four string columns. */
  strings: [number, number, number, number];
}

/**
 * Replays the sidecar of `snap` through `each`, in the snapshot's order, one block at a time
 * (memory stays bounded by a block), and returns how many entries it gave; or a reason it
 * cannot be used. A reason found past the first block comes after some entries were given:
 * the caller drops what it got (the snapshot is loaded first, into an empty index).
 */
export async function readSidecar(
  snap: SnapshotFacts,
  each: SidecarEntry,
  /** Told the header's entry count before the first entry (to size what they go into). */
  expect?: (entries: number) => void,
): Promise<number | string> {
  const file = sidecarPath(snap.file);
  await unlink(`${file}.tmp`).catch(() => {}); // a write a crash cut short
  let fh: FileHandle;
  try {
    fh = await open(file, "r");
  } catch {
    return "no sidecar";
  }
  try {
    const size = (await fh.stat()).size;
    const line = await readLine(fh, 0, size);
    if (line === null) return "no header";
    const header = parseJson(line.text);
    if (header === null) return "unreadable header";
    if (header.$sidecar !== VERSION || header.endian !== ENDIAN) return "another format";
    if (header.snapshot !== snap.gen || header.bytes !== snap.bytes) return "written for another snapshot";
    const { entries, first, tail } = header;
    if (
      !Number.isSafeInteger(entries) ||
      !Number.isSafeInteger(first) ||
      typeof tail !== "string" ||
      (entries as number) * ENTRY_BYTES > size // more entries than the file has room for
    ) {
      return "unreadable header";
    }
    if (tail !== (await tailHash(snap.file, snap.bytes))) return "written for other snapshot bytes";
    expect?.(entries as number);
    let pos = line.next;
    let off = first as number;
    let count = 0;
    let buf = Buffer.alloc(0);
    while (pos < size) {
      const hl = await readLine(fh, pos, size);
      const head = hl === null ? null : blockHead(hl.text);
      if (hl === null || head === null) return "unreadable block";
      const need = head.n * ENTRY_BYTES + head.strings.reduce((a, b) => a + b, 0);
      if (hl.next + need > size) return "torn block";
      if (buf.length < need) buf = Buffer.allocUnsafeSlow(need); // its own ArrayBuffer: offset 0, aligned
      await readFully(fh, buf, need, hl.next);
      const next = replayBlock(buf, head, off, each);
      if (typeof next === "string") return next;
      off = next;
      count += head.n;
      pos = hl.next + need;
    }
    if (count !== entries) return `holds ${count} of ${entries as number} entries`;
    if (off !== snap.bytes) return "line lengths do not match the snapshot";
    return count;
  } catch (err) {
    return `unreadable: ${errorMessage(err)}`; // a read error costs the open its speed, never the open
  } finally {
    await fh.close();
  }
}

function parseJson(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function blockHead(text: string): BlockHead | null {
  const h = parseJson(text);
  if (h === null) return null;
  const { n, a, k, l, s, d } = h;
  const sizes = [n, k, l, s, d];
  if (!sizes.every((x) => Number.isSafeInteger(x) && (x as number) >= 0)) return null;
  if (!Array.isArray(a) || !a.every((x) => typeof x === "string" && x.length > 0)) return null;
  return { n: n as number, agents: a as string[], strings: [k, l, s, d] as [number, number, number, number] };
}

/** The line at `pos` (up to 1 MiB) and where the next byte is, or null when there is no whole one. */
async function readLine(
  fh: FileHandle,
  pos: number,
  size: number,
): Promise<{ text: string; next: number } | null> {
  for (let want = 4096; ; want *= 4) {
    const len = Math.min(want, size - pos);
    if (len <= 0) return null;
    const buf = Buffer.allocUnsafe(len);
    await readFully(fh, buf, len, pos);
    const nl = buf.indexOf(0x0a);
    if (nl >= 0) return { text: buf.toString("utf8", 0, nl), next: pos + nl + 1 };
    if (len < want || want >= 1 << 20) return null;
  }
}

async function readFully(fh: FileHandle, buf: Buffer, len: number, pos: number): Promise<void> {
  let got = 0;
  while (got < len) {
    const { bytesRead } = await fh.read(buf, got, len - got, pos + got);
    if (bytesRead === 0) throw new Error(`file ended ${len - got} bytes early`);
    got += bytesRead;
  }
}

/**
 * Gives the entries of one block (`buf`: its bytes after the header line) to `each`, decoding
 * each string as its entry needs it (no per-block lists: less for the collector at a million);
 * returns the offset after its last line, or what is wrong with the block (perhaps after giving
 * some of its entries: see readSidecar).
 */
function replayBlock(buf: Buffer, head: BlockHead, from: number, each: SidecarEntry): number | string {
  const count = head.n;
  // views, not copies: `buf` starts its own ArrayBuffer and the widths go 8, 4, 4, 2, 1, so
  // every column is aligned (they are used before the next block is read into `buf`)
  const base = buf.byteOffset;
  const updated = new Float64Array(buf.buffer, base, count);
  const sid = new Int32Array(buf.buffer, base + 8 * count, count);
  const len = new Uint32Array(buf.buffer, base + 12 * count, count);
  const agent = new Uint16Array(buf.buffer, base + 16 * count, count);
  const flags = new Uint8Array(buf.buffer, base + 18 * count, count);
  const [k, l, s, d] = head.strings;
  const keys = new Column(buf, ENTRY_BYTES * count, k);
  const labels = new Column(buf, keys.end, l);
  const parents = new Column(buf, labels.end, s);
  const names = new Column(buf, parents.end, d);
  const agents = head.agents;
  let off = from;
  for (let i = 0; i < count; i++) {
    const f = flags[i]!;
    const a = agent[i]!;
    const u = updated[i]!;
    const key = keys.next();
    if (key === null) return "string columns do not match";
    if (a >= agents.length || !Number.isFinite(u) || key.length === 0) return "unreadable block";
    const label = (f & LABEL) !== 0 ? labels.next() : undefined;
    const parent = (f & SPAWNED) !== 0 ? parents.next() : undefined;
    const name = (f & DISPLAY) !== 0 ? names.next() : undefined;
    if (label === null || parent === null || name === null) return "string columns do not match";
    each(key, sid[i]!, agents[a]!, u, (f & ARCHIVED) !== 0, label, parent, name, off, len[i]!);
    off += len[i]! + 1;
  }
  if (!keys.done() || !labels.done() || !parents.done() || !names.done())
    return "string columns do not match";
  return off;
}

/** A "\0"-joined string column, read one string at a time. */
class Column {
  readonly end: number;
  private at: number;
  /** Strings given so far (an empty column holds none; one holding "" is 0 bytes too: see done). */
  private given = 0;

  constructor(
    private readonly buf: Buffer,
    start: number,
    bytes: number,
  ) {
    this.at = start;
    this.end = start + bytes;
  }

  /** The next string, or null when the column has none left. */
  next(): string | null {
    if (this.at > this.end) return null;
    let e = this.buf.indexOf(0, this.at);
    if (e < 0 || e > this.end) e = this.end;
    const str = this.buf.toString("utf8", this.at, e);
    this.at = e + 1; // past the end (end + 1) once the last string is taken
    this.given++;
    return str;
  }

  /** Every string was taken (a 0-byte column holds none, or one empty string). */
  done(): boolean {
    return this.at === this.end + 1 || (this.given === 0 && this.end === this.at);
  }
}
