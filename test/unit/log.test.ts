import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";

function capture() {
  const lines: string[] = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { logger: createLogger({ level: "info", destination: dest }), lines };
}

describe("logger redaction", () => {
  it("censors known secret fields wherever they sit in the object", () => {
    const { logger, lines } = capture();
    logger.info(
      {
        config: { models: { providers: { o: { apiKey: "sk-live-abcdefghijklmnopqrstuvwxyz" } } } },
        token: "123456:ABCDEF",
      },
      "starting",
    );
    const out = lines.join("");
    expect(out).not.toContain("sk-live-abcdefghijklmnopqrstuvwxyz");
    expect(out).not.toContain("123456:ABCDEF");
    expect(out).toContain("[redacted]");
  });

  it("masks credentials inside messages, nested strings and errors with the history patterns", () => {
    const { logger, lines } = capture();
    const token = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx";
    logger.warn(
      { url: `https://api.example.com/bot?auth=Bearer ${token}`, err: new Error(`failed with ${token}`) },
      `send failed: ${token}`,
    );
    const out = lines.join("");
    expect(out).not.toContain(token);
    expect(out).toContain("xoxb-1");
    expect(out).toContain("send failed");
  });
});
