/**
 * `true` when A and B are the same type: every key, nested ones too, optional or not. Used where
 * a zod schema re-validates a TypeScript type read back from outside (Redis, a queue): annotating
 * the schema as `z.ZodType<T>` only proves its output fits T, so a field T gains but the schema
 * lacks would be stripped by every parse, silently. Usage:
 * `const exact: Identical<z.output<typeof schema>, T> = true;` (fails to build when they differ).
 */
export type Identical<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
