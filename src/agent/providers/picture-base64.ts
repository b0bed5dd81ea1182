import type { PictureContent } from "../../media/types.js";

/** Picture bytes encoded per string: a multiple of 3, so the strings join without padding. */
const BASE64_STEP = 3 * 16 * 1024;
/** The longest string `base64Of` gives. */
const BASE64_STRING_MAX = (BASE64_STEP / 3) * 4;
/** What a picture is read into at a time. */
const READ_BYTES = 4 * BASE64_STEP;

/** Buffers kept for the next request's pictures (`withScratch`). */
const scratches: Buffer[] = [];
const SCRATCHES_KEPT = 4;

/**
 * `fn` with a buffer to read pictures into (`base64Of`'s scratch) and one that holds a string of
 * their base64 (a writer's), taken from a small pool and given back when `fn` is done, so a
 * request with pictures allocates neither.
 */
export async function withScratch<T>(fn: (scratch: Buffer, out: Buffer) => Promise<T>): Promise<T> {
  const both = scratches.pop() ?? Buffer.allocUnsafeSlow(READ_BYTES + BASE64_STRING_MAX);
  try {
    return await fn(both.subarray(0, READ_BYTES), both.subarray(READ_BYTES));
  } finally {
    if (scratches.length < SCRATCHES_KEPT) scratches.push(both);
  }
}

/**
 * A picture's base64 as strings of at most BASE64_STRING_MAX characters that join to it, read as
 * they are asked for: into `scratch` where the picture's store can (each piece is encoded before
 * the next is read into it), 0–2 bytes carried from one piece to the next. Fails when the picture
 * reads more or fewer bytes than it said.
 */
export async function* base64Of(p: PictureContent, scratch?: Buffer): AsyncGenerator<string> {
  let read = 0;
  const carry = Buffer.alloc(3);
  let carried = 0;
  for await (const piece of await p.open(scratch)) {
    const chunk = Buffer.isBuffer(piece)
      ? piece
      : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
    read += chunk.length;
    if (read > p.bytes) throw new Error(`a picture read more than its ${p.bytes} bytes`);
    let at = 0;
    if (carried > 0) {
      at = Math.min(3 - carried, chunk.length);
      chunk.copy(carry, carried, 0, at);
      carried += at;
      if (carried < 3) continue;
      yield carry.toString("base64");
      carried = 0;
    }
    const whole = at + Math.floor((chunk.length - at) / 3) * 3;
    for (let i = at; i < whole; i += BASE64_STEP)
      yield chunk.toString("base64", i, Math.min(i + BASE64_STEP, whole));
    carried = chunk.copy(carry, 0, whole);
  }
  if (read !== p.bytes) throw new Error(`a picture read ${read} bytes, not ${p.bytes}`);
  if (carried > 0) yield carry.toString("base64", 0, carried);
}
