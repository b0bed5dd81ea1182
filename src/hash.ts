/** FNV-1a's 32-bit basis and prime. */
export const FNV_BASIS = 0x811c9dc5;
export const FNV_PRIME = 0x01000193;

/**
 * A 32-bit FNV-1a hash of a string's UTF-16 code units, from `basis` (pass a previous hash to
 * continue it over another string). Not for anything an attacker must not collide.
 */
export function fnv1a(s: string, basis = FNV_BASIS): number {
  let h = basis;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), FNV_PRIME);
  return h | 0;
}
