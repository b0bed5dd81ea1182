import { open } from "node:fs/promises";

const NL = 0x0a;

export interface LineInfo {
  /** 1-based line number. */
  lineNo: number;
  /** false for a last line without a trailing newline (possibly torn by a crash). */
  terminated: boolean;
  /** Byte offset of the line's first byte in the file. */
  offset: number;
}

/**
 * Calls `onLine` for every non-empty line of `file`, front to back, reading fixed-size chunks
 * so memory stays bounded by the longest line. Returns whether the file ends with a newline
 * (true for an empty or missing file): an appender must start on a fresh line when it does not.
 */
export async function forEachLine(
  file: string,
  onLine: (line: Buffer, info: LineInfo) => void,
  chunkBytes = 1 << 20,
): Promise<{ endsWithNewline: boolean; bytes: number }> {
  const fh = await open(file, "r");
  try {
    let carry: Buffer[] = [];
    let lineNo = 0;
    let pos = 0;
    let lastByte = NL;
    let lineStart = 0;
    const buf = Buffer.allocUnsafe(chunkBytes);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, chunkBytes, pos);
      if (bytesRead === 0) break;
      const base = pos;
      pos += bytesRead;
      lastByte = buf[bytesRead - 1]!;
      let start = 0;
      let nl = buf.indexOf(NL, 0);
      while (nl !== -1 && nl < bytesRead) {
        lineNo++;
        const piece = buf.subarray(start, nl);
        const line = carry.length > 0 ? Buffer.concat([...carry, piece]) : piece;
        carry = [];
        if (line.length > 0) onLine(line, { lineNo, terminated: true, offset: lineStart });
        start = nl + 1;
        lineStart = base + start;
        nl = buf.indexOf(NL, start);
      }
      // the chunk buffer is reused, so a partial line must be copied out
      if (start < bytesRead) carry.push(Buffer.from(buf.subarray(start, bytesRead)));
    }
    if (carry.length > 0) {
      lineNo++;
      const line = Buffer.concat(carry);
      if (line.length > 0) onLine(line, { lineNo, terminated: false, offset: lineStart });
    }
    return { endsWithNewline: lastByte === NL, bytes: pos };
  } finally {
    await fh.close();
  }
}
