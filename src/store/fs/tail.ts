const NL = 0x0a;

/** Reads up to `length` bytes at `position` into `buf` at `offset`; resolves with the count read. */
export type PositionalRead = (
  buf: Buffer,
  offset: number,
  length: number,
  position: number,
) => Promise<number>;

/**
 * Walks the lines of a file from its end towards its start, reading `chunkBytes` at a time,
 * until `onLine` returns true (enough) or the start is reached. Memory is bounded by the
 * chunk size plus the longest line. `terminated` is false only for a last line with no
 * trailing newline (a write torn by a crash, or one still being written by another process).
 * Returns the number of bytes read.
 */
export async function scanBackwards(
  readAt: PositionalRead,
  size: number,
  onLine: (line: Buffer, info: { offset: number; terminated: boolean }) => boolean,
  chunkBytes = 64 * 1024,
): Promise<number> {
  let pos = size;
  let bytesRead = 0;
  let carry: Buffer[] = [];
  // the first segment found is whatever follows the file's last newline
  let first = true;
  while (pos > 0) {
    const len = Math.min(chunkBytes, pos);
    pos -= len;
    const buf = Buffer.allocUnsafe(len);
    let got = 0;
    while (got < len) {
      const n = await readAt(buf, got, len - got, pos + got);
      if (n === 0) break; // truncated under us: treat the rest as absent
      got += n;
    }
    bytesRead += got;
    let end = got;
    while (end > 0) {
      const nl = buf.lastIndexOf(NL, end - 1);
      if (nl === -1) break;
      const piece = buf.subarray(nl + 1, end);
      const line = carry.length > 0 ? Buffer.concat([piece, ...carry]) : piece;
      carry = [];
      if (line.length > 0 && onLine(line, { offset: pos + nl + 1, terminated: !first })) return bytesRead;
      first = false;
      end = nl;
    }
    if (end > 0) carry.unshift(buf.subarray(0, end));
  }
  if (carry.length > 0) {
    const line = Buffer.concat(carry);
    if (line.length > 0) onLine(line, { offset: 0, terminated: !first });
  }
  return bytesRead;
}
