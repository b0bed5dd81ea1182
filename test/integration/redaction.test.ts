import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capturingLogger, startTestApp, type TestApp } from "../harness.js";

/**
 * Secrets a person pastes never come back raw from any history view (sessions.history, the
 * sessions_history tool, sessions_list with messageLimit — the dashboard reads the same RPC) nor
 * from a log line.
 */

const SECRETS = {
  awsId: "AKIAIOSFODNN7EXAMPLE",
  awsSecret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  jwt: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
  urlPass: "s3cr3tPassw0rd",
  stripe: "sk_live_51H8abcdefghijklmnopqrstuvWXYZ0123",
  discord: "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789AB",
  // An AWS secret access key next to a loose label, not its INI/JSON name (issue 51).
  awsLabelled: "Xk9vQ2mR7tLp4sWz8yBn3cFh6jDg1eKa5uNi0oPq",
};
const MESSAGE = `here: ${SECRETS.awsId} aws_secret_access_key = ${SECRETS.awsSecret} ${SECRETS.jwt} postgres://app:${SECRETS.urlPass}@db/x ${SECRETS.stripe} ${SECRETS.discord} and my awsSecret is ${SECRETS.awsLabelled}`;
/** A part of each secret that masking removes (the first 6 and last 4 characters may stay). */
const cores = Object.values(SECRETS).map((s) => s.slice(6, -4));

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    models: {
      default: "s/echo",
      providers: { s: { kind: "scripted", rules: [{ match: "^(.*)$", reply: "echo: $1" }] } },
    },
  });
  const sent = await t.rpc("chat.send", { sessionKey: "main", message: MESSAGE, timeoutSeconds: 20 });
  expect(sent.result.status).toBe("ok");
});
afterAll(async () => t?.stop());

function expectClean(value: unknown) {
  const text = JSON.stringify(value);
  for (const c of cores) expect(text).not.toContain(c);
}

describe("redaction in every history view", () => {
  it("sessions.history", async () => {
    const h = await t.rpc("sessions.history", { sessionKey: "main" });
    expect(h.result.messages).toHaveLength(2);
    expect(h.result.contentRedacted).toBe(true);
    expectClean(h.result);
  });

  it("the sessions_history tool and sessions_list with messageLimit", async () => {
    expectClean(await t.invoke("agent:main:main", "sessions_history", { sessionKey: "main" }));
    const list = await t.invoke("agent:main:main", "sessions_list", { messageLimit: 5 });
    expect(JSON.stringify(list)).toContain("echo:");
    expectClean(list);
    const rpcList = await t.rpc("sessions.list", { messageLimit: 5 });
    expectClean(rpcList.result);
  });

  it("log lines", () => {
    const { logger, lines } = capturingLogger();
    logger.info({ text: MESSAGE }, `inbound ${MESSAGE}`);
    expect(lines.join("")).toContain("here:");
    expectClean(lines.join(""));
  });
});
