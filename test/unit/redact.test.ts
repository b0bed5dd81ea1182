import { describe, expect, it } from "vitest";
import { redactText } from "../../src/redact.js";

/**
 * The shapes people paste (issue 12, SEMANTICS §3): for every pattern one real-shaped sample that
 * must be masked (its secret part gone), and one near-miss that must stay exactly as it is.
 */

interface Row {
  name: string;
  sample: string;
  /** The part of the sample that must not survive. */
  secret: string;
  nearMiss: string;
}

const JWT =
  "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
const DISCORD = "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789AB";

const rows: Row[] = [
  {
    name: "AWS access key id",
    sample: "key id AKIAIOSFODNN7EXAMPLE here",
    secret: "IOSFODNN7EXAM",
    nearMiss: "AKIA is how AWS key ids start; AKIAIOSFODNN7 is too short",
  },
  {
    name: "AWS temporary key id",
    sample: "ASIAY34FZKBOKMUTVV7A",
    secret: "Y34FZKBOKMUTV",
    nearMiss: "ASIAN cuisine, ASIAPACIFIC region",
  },
  {
    name: "AWS secret access key (INI)",
    sample: "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    secret: "XUtnFEMI/K7MDENG/bPxRfiCY",
    nearMiss: "aws_secret_access_key = see the vault",
  },
  {
    name: "AWS secret access key (JSON)",
    sample: '{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}',
    secret: "XUtnFEMI/K7MDENG/bPxRfiCY",
    nearMiss: '{"SecretAccessKeyId": 4}',
  },
  {
    name: "JWT",
    sample: `session ${JWT}`,
    secret: JWT.slice(10, -10),
    nearMiss: "eyJhbGciOiJIUzI1NiJ9 is a base64 JSON header, not a token",
  },
  {
    name: "URL credentials",
    sample: "DATABASE at postgres://admin:s3cr3tPassw0rd@db.internal:5432/app",
    secret: "s3cr3tPassw0rd",
    nearMiss: "see https://user@example.com/path and http://example.com:8080/x?a=b",
  },
  {
    name: "PEM private key",
    sample:
      "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5RTvVbcDk2v4\n-----END EC PRIVATE KEY-----",
    secret: "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5RTvVbcDk2v4",
    nearMiss: "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
  },
  {
    name: "Slack bot token",
    sample: "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    secret: "1234567890123-AbCdEfGhIjKlMnOp",
    nearMiss: "Slack bot tokens start with xoxb- and are long",
  },
  {
    name: "Slack refresh/config token (xoxe-)",
    sample: "xoxe-1-My0xLTEyMzQ1Njc4OTAtMTIzNDU2Nzg5MDEyMw",
    secret: "My0xLTEyMzQ1Njc4OTAtMTIz",
    nearMiss: "xoxe-short",
  },
  {
    name: "Slack app token",
    sample: "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef",
    secret: "A0123456789-1234567890123-abcdef01",
    nearMiss: "xapp-level tokens are configured per app",
  },
  {
    name: "Discord bot token",
    sample: `DISCORD_BOT ${DISCORD}`,
    secret: DISCORD.slice(8, -6),
    nearMiss: "Meeting.notes.txt and MTA5.Ga.xyz and www.example.com",
  },
  {
    name: "Google API key",
    sample: "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    secret: "D-9tSrke72PouQMnMX-a7e",
    nearMiss: "AIza is how Google API keys begin",
  },
  {
    name: "GitHub classic token",
    sample: "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    secret: "C3d4E5f6G7h8I9j0K1l2M3n4",
    nearMiss: "ghp_short and the ghp_ prefix",
  },
  {
    name: "GitHub fine-grained token",
    sample: "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS",
    secret: "0123456789_abcdefghijklmnopqrstuvwxyz",
    nearMiss: "tokens named github_pat_ are fine-grained",
  },
  {
    name: "Stripe live secret key",
    sample: "sk_live_51H8abcdefghijklmnopqrstuvWXYZ0123",
    secret: "abcdefghijklmnopqrstuv",
    nearMiss: "sk_live_demo is a placeholder",
  },
  {
    name: "Stripe restricted key",
    sample: "rk_live_51H8abcdefghijklmnopqrstuvWXYZ0123",
    secret: "abcdefghijklmnopqrstuv",
    nearMiss: "rk_live_ keys are restricted",
  },
  {
    name: "Bearer header",
    sample: "Authorization: Bearer abc123def456ghi789jkl012",
    secret: "def456ghi789jkl",
    nearMiss: "Bearer tokens are documented in RFC 6750",
  },
];

describe("redaction table", () => {
  it.each(rows)("$name: the real-shaped sample is masked", ({ sample, secret }) => {
    const r = redactText(sample);
    expect(r.redacted).toBe(true);
    expect(r.text).not.toContain(secret);
    // Idempotent: masked text is not masked again.
    expect(redactText(r.text)).toEqual({ text: r.text, redacted: false });
  });

  it.each(rows)("$name: the near-miss stays unchanged", ({ nearMiss }) => {
    expect(redactText(nearMiss)).toEqual({ text: nearMiss, redacted: false });
  });

  it("URL credentials keep scheme, user and host", () => {
    expect(redactText("redis://default:hunter22@cache:6379/0").text).toBe("redis://default:***@cache:6379/0");
  });
});
