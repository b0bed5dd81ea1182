/**
 * Context windows of well-known model families, used when `models.providers.<id>.models.<model>`
 * names none. Matched on the bare model name (case-insensitive, first match wins); anything
 * unknown gets DEFAULT_CONTEXT_TOKENS. Figures are the vendors' published limits.
 */

export const DEFAULT_CONTEXT_TOKENS = 128_000;

interface Family {
  match: RegExp;
  contextTokens: number;
  maxOutputTokens?: number;
}

const FAMILIES: readonly Family[] = [
  { match: /^gpt-4\.1/, contextTokens: 1_047_576, maxOutputTokens: 32_768 },
  { match: /^gpt-5/, contextTokens: 400_000, maxOutputTokens: 128_000 },
  { match: /^gpt-4o/, contextTokens: 128_000, maxOutputTokens: 16_384 },
  { match: /^gpt-4-turbo/, contextTokens: 128_000, maxOutputTokens: 4096 },
  { match: /^gpt-4(?:-\d|$)/, contextTokens: 8192, maxOutputTokens: 8192 },
  { match: /^gpt-3\.5-turbo/, contextTokens: 16_385, maxOutputTokens: 4096 },
  { match: /^o[134](?:-|$)/, contextTokens: 200_000, maxOutputTokens: 100_000 },
  { match: /^claude-(?:opus-4|4-opus)/, contextTokens: 200_000, maxOutputTokens: 32_000 },
  { match: /^claude-(?:sonnet-4|4-sonnet|3-7-sonnet)/, contextTokens: 200_000, maxOutputTokens: 64_000 },
  { match: /^claude-(?:haiku-4|3-5)/, contextTokens: 200_000, maxOutputTokens: 8192 },
  { match: /^claude-/, contextTokens: 200_000, maxOutputTokens: 4096 },
  { match: /^gemini-(?:1\.5|2|3)/, contextTokens: 1_048_576, maxOutputTokens: 8192 },
  { match: /llama-?3\.[1-3]|llama-?4/, contextTokens: 128_000 },
  { match: /^(?:mistral-large|mistral-medium|codestral)/, contextTokens: 128_000 },
  { match: /^qwen(?:2\.5|3)/, contextTokens: 32_768 },
  { match: /^deepseek/, contextTokens: 128_000 },
];

/** The family facts for a bare model name (a provider prefix or `org/` path is ignored). */
export function knownModelFacts(model: string): { contextTokens: number; maxOutputTokens?: number } {
  const name = (model.split("/").at(-1) ?? model).toLowerCase();
  const f = FAMILIES.find((x) => x.match.test(name));
  if (!f) return { contextTokens: DEFAULT_CONTEXT_TOKENS };
  return f.maxOutputTokens !== undefined
    ? { contextTokens: f.contextTokens, maxOutputTokens: f.maxOutputTokens }
    : { contextTokens: f.contextTokens };
}
