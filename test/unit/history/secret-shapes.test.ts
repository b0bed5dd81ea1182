import { describe, expect, it } from "vitest";
import { sanitizeText } from "../../../src/history/index.js";

/**
 * Real-world secret shapes, one row per rule of a well-kept secret scanner's public rule list (the
 * ids are gitleaks' rule ids; the descriptions and sample values are ours, assembled at runtime so no
 * literal credential sits in the source). Every sample goes through the history normaliser
 * (`sanitizeText`, the function every history view and sessions.list messageLimit use): the secret
 * part must be gone, the masked result must be stable, and the words around it must survive.
 */

/** Deterministic filler of `n` characters from `alphabet`, walking it with a stride. */
function fill(alphabet: string, n: number, seed = 7): string {
  let out = "";
  for (let i = 0; i < n; i++) out += alphabet[(seed + i * 11) % alphabet.length];
  return out;
}
const ALNUM = "aB3cD4eF5gH6iJ7kL8mN9oP0qR1sT2uVwXyZ";
const UPPER = "A7B3C9D2E5F8G1H4J6K0LMNPQRSTUVWXYZ";
const HEX = "0123456789abcdef";
const B64 = `${ALNUM}+/`;
const BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L";

interface Shape {
  /** gitleaks rule id. */
  rule: string;
  /** What it is, in our words. */
  what: string;
  /** The secret as it would be pasted. */
  secret: string;
  /** How it sits in a message; `$` is replaced by the secret. */
  context?: string;
}

const shapes: Shape[] = [
  { rule: "aws-access-token", what: "AWS access key id", secret: `AKIA${fill(UPPER, 16)}` },
  {
    rule: "aws-secret-access-key (labelled)",
    what: "AWS secret access key next to a loose label",
    secret: fill(B64, 40),
    context: "my awsSecret is $ ok",
  },
  { rule: "github-pat", what: "GitHub classic personal token", secret: `ghp_${fill(ALNUM, 36)}` },
  { rule: "github-oauth", what: "GitHub OAuth access token", secret: `gho_${fill(ALNUM, 36)}` },
  { rule: "github-app-token", what: "GitHub app installation token", secret: `ghs_${fill(ALNUM, 36)}` },
  {
    rule: "github-fine-grained-pat",
    what: "GitHub fine-grained token",
    secret: `github_pat_11${fill(UPPER, 20)}_${fill(ALNUM, 59)}`,
  },
  { rule: "gitlab-pat", what: "GitLab personal access token", secret: `glpat-${fill(ALNUM, 20)}` },
  {
    rule: "slack-bot-token",
    what: "Slack bot token",
    secret: `xoxb-${fill("0123456789", 11)}-${fill("0123456789", 13)}-${fill(ALNUM, 24)}`,
  },
  {
    rule: "slack-user-token",
    what: "Slack user token",
    secret: `xoxp-${fill("0123456789", 11)}-${fill("0123456789", 12)}-${fill(HEX, 32)}`,
  },
  {
    rule: "slack-webhook-url",
    what: "Slack incoming webhook URL",
    secret: `https://hooks.slack.com/services/T${fill(UPPER, 10)}/B${fill(UPPER, 10)}/${fill(ALNUM, 24)}`,
  },
  { rule: "stripe-access-token", what: "Stripe live secret key", secret: `sk_live_${fill(ALNUM, 32)}` },
  { rule: "gcp-api-key", what: "Google Cloud API key", secret: `AIza${fill(`${ALNUM}_-`, 35)}` },
  {
    rule: "openai-api-key",
    what: "OpenAI project key",
    secret: `sk-proj-${fill(ALNUM, 74)}T3BlbkFJ${fill(ALNUM, 74)}`,
  },
  {
    rule: "anthropic-api-key",
    what: "Anthropic API key",
    secret: `sk-ant-api03-${fill(`${ALNUM}_-`, 93)}AA`,
  },
  { rule: "npm-access-token", what: "npm access token", secret: `npm_${fill(ALNUM, 36)}` },
  {
    rule: "pypi-upload-token",
    what: "PyPI upload token (a macaroon)",
    secret: `pypi-AgEIcHlwaS5vcmc${fill(`${ALNUM}_-`, 60)}`,
  },
  {
    rule: "sendgrid-api-token",
    what: "SendGrid API key",
    secret: `SG.${fill(`${ALNUM}_-`, 22)}.${fill(`${ALNUM}_-`, 43)}`,
  },
  { rule: "twilio-api-key", what: "Twilio API key sid", secret: `SK${fill(HEX, 32)}` },
  { rule: "shopify-access-token", what: "Shopify admin access token", secret: `shpat_${fill(HEX, 32)}` },
  { rule: "digitalocean-pat", what: "DigitalOcean personal token", secret: `dop_v1_${fill(HEX, 64)}` },
  {
    rule: "huggingface-access-token",
    what: "Hugging Face token",
    secret: `hf_${fill("abcdefghijkLMNOPQRStuvwxyz", 34)}`,
  },
  { rule: "databricks-api-token", what: "Databricks token", secret: `dapi${fill(HEX, 32)}` },
  { rule: "linear-api-key", what: "Linear API key", secret: `lin_api_${fill(ALNUM, 40)}` },
  {
    rule: "postman-api-token",
    what: "Postman API key",
    secret: `PMAK-${fill(HEX, 24)}-${fill(HEX, 34)}`,
  },
  { rule: "age-secret-key", what: "age encryption identity", secret: `AGE-SECRET-KEY-1${fill(BECH32, 58)}` },
  {
    rule: "grafana-service-account-token",
    what: "Grafana service account token",
    secret: `glsa_${fill(ALNUM, 32)}_${fill(HEX, 8)}`,
  },
  { rule: "sentry-user-token", what: "Sentry user auth token", secret: `sntryu_${fill(HEX, 64)}` },
  { rule: "doppler-api-token", what: "Doppler service token", secret: `dp.pt.${fill(ALNUM, 43)}` },
  { rule: "new-relic-user-api-key", what: "New Relic user key", secret: `NRAK-${fill(UPPER, 27)}` },
  {
    rule: "azure-storage-account-key",
    what: "Azure storage connection string key",
    secret: `${fill(B64, 86)}==`,
    context: "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=$;EndpointSuffix=core.windows.net",
  },
  {
    rule: "telegram-bot-api-token",
    what: "Telegram bot token",
    secret: `${fill("0123456789", 10)}:AA${fill(`${ALNUM}_-`, 33)}`,
  },
  {
    rule: "jwt",
    what: "JSON web token",
    secret: `eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx${fill(ALNUM, 20)}.${fill(`${ALNUM}_-`, 43)}`,
  },
  {
    rule: "private-key",
    what: "PEM private key",
    secret: `-----BEGIN OPENSSH PRIVATE KEY-----\n${fill(B64, 70)}\n${fill(B64, 70)}\n-----END OPENSSH PRIVATE KEY-----`,
  },
];

/** The part of a secret that must not survive: masking keeps at most 6 leading and 4 trailing. */
function core(secret: string): string {
  return secret.slice(6, -4);
}

describe("secret shapes on the history normaliser", () => {
  it("covers at least 20 shapes", () => {
    expect(shapes.length).toBeGreaterThanOrEqual(20);
  });

  it.each(shapes)("$rule ($what) is masked, stably, and the words around it stay", ({ secret, context }) => {
    const text = (context ?? "pasted $ by mistake").replace("$", secret);
    const r = sanitizeText(text, { strip: false });
    expect(r.redacted).toBe(true);
    expect(r.text).not.toContain(core(secret));
    const [before = "", after = ""] = (context ?? "pasted $ by mistake").split("$");
    expect(r.text.startsWith(before.slice(0, 8))).toBe(true);
    expect(r.text.endsWith(after.slice(-8))).toBe(true);
    expect(sanitizeText(r.text, { strip: false })).toMatchObject({ text: r.text, redacted: false });
  });

  it.each([
    ["a 40-character hex digest after 'secret'", `the secret commit is ${fill(HEX, 40)} on main`],
    ["a long path after 'aws'", "see aws docs at /IAM/latest/UserGuide/id_credentials_access-keys"],
    ["prose about key prefixes", "GitLab tokens start with glpat- and Hugging Face ones with hf_"],
    ["a short SG. abbreviation", "SG.x means Singapore here"],
    ["a word that starts like a Twilio sid", "SKIPPED and SKETCHY are words"],
  ])("near miss stays: %s", (_name, text) => {
    expect(sanitizeText(text, { strip: false })).toMatchObject({ text, redacted: false });
  });
});
