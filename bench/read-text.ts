import type { IncomingMessage } from "node:http";

/** A request's or response's whole body as UTF-8 text (the bench's servers and clients). */
export function readText(stream: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let s = "";
    stream.setEncoding("utf8");
    stream.on("data", (c: string) => {
      s += c;
    });
    stream.on("end", () => resolve(s));
    stream.on("error", reject);
  });
}
