import type { PictureContent } from "../../media/types.js";

/** Picture bytes encoded per string: a multiple of 3, so the strings join without padding. */
export const BASE64_STEP = 3 * 16 * 1024;

/**
 * A picture's base64 as strings of at most BASE64_STEP bytes' worth (65,536 characters) that join
 * to it, read as they are asked for: into `scratch` where the picture's store can (each piece is
 * encoded before the next is read into it), 0–2 bytes carried from one piece to the next. Fails
 * when the picture reads more or fewer bytes than it said.
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
