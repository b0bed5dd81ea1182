/**
 * Applies a patch to a stored record without a JSON round trip of the whole record: stored
 * records are already JSON-clean (and never mutated), so only the patch's values need
 * cleaning. The result equals `JSON.parse(JSON.stringify({ ...current, ...patch }))` with
 * `undefined` patch values deleting their field and `skip` fields left alone.
 */
export function mergePatch(
  current: object,
  patch: object,
  skip: ReadonlySet<string>,
): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...current };
  for (const [field, value] of Object.entries(patch)) {
    if (skip.has(field)) continue;
    const clean = jsonClean(value);
    if (clean === undefined) delete merged[field];
    else merged[field] = clean;
  }
  return merged;
}

/** What a JSON round trip makes of an object member's value (`undefined`: the member is dropped). */
function jsonClean(v: unknown): unknown {
  switch (typeof v) {
    case "string":
    case "boolean":
      return v;
    case "number":
      return Number.isFinite(v) ? v : null;
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
    default: {
      if (v === null) return null;
      const text = JSON.stringify(v); // objects (toJSON honoured); a bigint throws, as before
      return text === undefined ? undefined : (JSON.parse(text) as unknown);
    }
  }
}
