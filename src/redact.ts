/**
 * Redaction patterns (SEMANTICS §3): one table of credential shapes, shared by every output that
 * may carry user or model text — the history views, the dashboard, and the logger.
 */

/** Long secrets keep their first 6 and last 4 characters; short ones become `***`. */
export function maskSecret(secret: string): string {
  const chars = Array.from(secret);
  return chars.length >= 18 ? `${chars.slice(0, 6).join("")}…${chars.slice(-4).join("")}` : "***";
}

/** Values that are already masked or are references, not secrets. */
export function isPlaceholder(v: string): boolean {
  return v === "" || v === "***" || v.includes("…") || v.startsWith("$");
}

/** Names whose quoted value is a secret (JSON fields, `x = "…"`): apiKey, api_key, token, password, … */
const SECRET_NAME = String.raw`[\w.-]*?(?:api[_-]?key|access[_-]?key|account[_-]?key|private[_-]?key|secret[_-]?key|token|secret|password|passwd)`;
/** Env-style `NAME=value`: the names above, or anything ending in `_KEY` / `-KEY` / `.key`, or `key`. */
const ENV_NAME = String.raw`(?:${SECRET_NAME}|(?:[\w.-]*[_.-])?key)`;

interface RedactRule {
  re: RegExp;
  /** Replacement for one match; `hit()` records that something was redacted. */
  replace: (hit: () => void, m: string, ...groups: string[]) => string;
}

const maskGroup =
  (
    before: (g: string[]) => string,
    value: (g: string[]) => string,
    after: (g: string[]) => string = () => "",
  ) =>
  (hit: () => void, m: string, ...g: string[]): string => {
    const v = value(g);
    if (isPlaceholder(v)) return m;
    hit();
    return `${before(g)}${maskSecret(v)}${after(g)}`;
  };

const PREFIXED_TOKEN = new RegExp(
  [
    "sk-[A-Za-z0-9_-]{12,}",
    "gh[pousr]_[A-Za-z0-9]{16,}",
    "github_pat_[A-Za-z0-9_]{20,}",
    "xox[a-z]-[A-Za-z0-9-]{10,}",
    "xapp-[A-Za-z0-9-]{10,}",
    "AIza[0-9A-Za-z_-]{20,}",
    "(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    // AWS access key ids (long-term AKIA, temporary ASIA, and the other documented prefixes).
    "(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA|AGPA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    // JWTs: base64url header and payload (both JSON objects, so both start with eyJ) and a signature.
    String.raw`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`,
    "gsk_[A-Za-z0-9]{16,}",
    "pplx-[A-Za-z0-9]{16,}",
    "npm_[A-Za-z0-9]{16,}",
    // Shapes from a secret scanner's public rule list (gitleaks rule ids in the table test).
    "glpat-[A-Za-z0-9_-]{20,}",
    "https://hooks\\.slack\\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
    "pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
    String.raw`SG\.[A-Za-z0-9_-]{20,24}\.[A-Za-z0-9_-]{39,50}`,
    "SK[0-9a-fA-F]{32}(?![A-Za-z0-9])",
    "shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
    "do[opr]_v1_[a-f0-9]{64}",
    "hf_[A-Za-z]{30,}",
    "dapi[a-f0-9]{32}(?:-\\d)?",
    "lin_api_[A-Za-z0-9]{40}",
    "PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}",
    "AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
    "glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
    "glc_[A-Za-z0-9+/]{32,}={0,2}",
    "sntryu_[a-f0-9]{64}",
    "sntrys_eyJ[A-Za-z0-9+/=_-]{40,}",
    String.raw`dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}`,
    "NRAK-[A-Z0-9]{27}",
  ]
    .map((p) => String.raw`(?<![\w-])${p}`)
    .join("|"),
  "g",
);

const RULES: readonly RedactRule[] = [
  {
    // PEM private keys, also when the END line was cut off.
    re: /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g,
    replace: (hit, m, kind = "") => {
      const masked = `-----BEGIN ${kind}PRIVATE KEY-----\n…redacted…\n-----END ${kind}PRIVATE KEY-----`;
      if (m === masked) return m;
      hit();
      return masked;
    },
  },
  {
    // Quoted values after a secret-ish name: "apiKey": "…", token = '…', PASSWORD="…".
    re: new RegExp(
      String.raw`(?<![\w.-])(${SECRET_NAME}["']?\s*[:=]\s*)(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)')`,
      "gi",
    ),
    replace: (hit, m, head = "", dq, sq) => {
      const quote = dq !== undefined ? '"' : "'";
      const v = dq ?? sq ?? "";
      if (isPlaceholder(v)) return m;
      hit();
      return `${head}${quote}${maskSecret(v)}${quote}`;
    },
  },
  {
    // Env-style assignments: OPENAI_API_KEY=…, DB_PASSWORD=…, ?key=… (no spaces around `=`).
    re: new RegExp(String.raw`(?<![\w.-])(${ENV_NAME}=)([^\s"'&;,<>]+)`, "gi"),
    replace: maskGroup(
      (g) => g[0] ?? "",
      (g) => g[1] ?? "",
    ),
  },
  {
    // CLI flags: --api-key X, --token=X, --password 'X'.
    re: /(--(?:api[_-]?key|token|secret|password|passwd)(?:\s+|=))(["']?)([^\s"']+)\2/gi,
    replace: maskGroup(
      (g) => `${g[0] ?? ""}${g[1] ?? ""}`,
      (g) => g[2] ?? "",
      (g) => g[1] ?? "",
    ),
  },
  {
    // Bearer tokens: after `Authorization:` always (however short); in prose when token-like (a
    // digit, or long), so plain words like "Bearer tokens" are not secrets.
    // (the whole token or nothing: a masked one, `abc123…l012`, is not masked again)
    re: /\b((?:(authorization)["']?\s*[:=]\s*["']?)?Bearer\s+)([A-Za-z0-9._~+/-]+=*)(?![\w.~+/=…-])/gi,
    replace: (hit, m, head = "", header, token = "") => {
      if (isPlaceholder(token)) return m;
      const tokenLike = /\d/.test(token) ? token.length >= 6 : token.length >= 24;
      if (header === undefined && !tokenLike) return m;
      hit();
      return `${head}${maskSecret(token)}`;
    },
  },
  {
    re: PREFIXED_TOKEN,
    replace: (hit, m) => {
      hit();
      return maskSecret(m);
    },
  },
  {
    // Credentials in URLs: scheme://user:password@host keeps the user, masks the password; the user
    // may be empty (`redis://:password@host`, the usual Redis form).
    re: /\b([a-z][a-z0-9+.-]{1,30}:\/\/)([^\s:/?#@]*):([^\s/?#@]+)@/gi,
    replace: (hit, m, scheme = "", user = "", pass = "") => {
      if (isPlaceholder(pass)) return m;
      hit();
      return `${scheme}${user}:${maskSecret(pass)}@`;
    },
  },
  {
    // AWS secret access keys (40 characters) after their usual names, also unquoted in INI files.
    re: /((?:aws_?)?secret_?access_?key["']?\s*[:=]\s*["']?)([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])/gi,
    replace: maskGroup(
      (g) => g[0] ?? "",
      (g) => g[1] ?? "",
    ),
  },
  {
    // AWS secret access keys after a loose label on the same line ("my awsSecret is …", "AWS secret:
    // …"): 40 base64 characters mixing upper case, lower case and digits (a hex digest or a word
    // run does not), within 40 characters after `aws` or `secret`.
    re: /((?:aws|secret)[^\n]{0,40}?)(?<![A-Za-z0-9/+._-])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=_-])(?!\.[A-Za-z0-9])/gi,
    replace: (hit, m, head = "", value = "") => {
      if (!/[A-Z]/.test(value) || !/[a-z]/.test(value) || !/\d/.test(value)) return m;
      hit();
      return `${head}${maskSecret(value)}`;
    },
  },
  {
    // Discord bot tokens: base64 user id (a snowflake starts M/N/O), timestamp, HMAC.
    re: /(?<![\w.-])[MNO][A-Za-z\d_-]{23,27}\.[A-Za-z\d_-]{6,7}\.[A-Za-z\d_-]{27,40}(?![\w.-])/g,
    replace: (hit, m) => {
      hit();
      return maskSecret(m);
    },
  },
  {
    // Telegram bot tokens: <bot id>:<secret>.
    re: /(?<![\w:])\d{6,12}:[A-Za-z0-9_-]{25,}(?![\w-])/g,
    replace: (hit, m) => {
      hit();
      return maskSecret(m);
    },
  },
];

/** Redacts every credential form SEMANTICS §3 lists; `redacted` says whether anything changed. */
export function redactText(text: string): { text: string; redacted: boolean } {
  let redacted = false;
  const hit = () => {
    redacted = true;
  };
  let out = text;
  for (const rule of RULES) {
    rule.re.lastIndex = 0;
    out = out.replace(rule.re, (m: string, ...args: unknown[]) => {
      const groups = args.slice(0, -2).map((g) => (typeof g === "string" ? g : undefined)) as string[];
      return rule.replace(hit, m, ...groups);
    });
  }
  return { text: out, redacted };
}

/** For logs and any other output: the text with credentials masked. */
export function redactSecrets(text: string): string {
  return redactText(text).text;
}

/** Object keys whose string value is a secret wherever it appears in structured content. */
export const SECRET_KEY_RE = new RegExp(`^${SECRET_NAME}$|^authorization$`, "i");
