import { displayKey } from "../sessions/keys.js";

/** Text output helpers: aligned tables with a header, and keys shown as the tools show them. */

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/** `agent:<default>:main` → `main`, like the tools show it to the default agent. */
export function shownKey(key: string, defaultAgentId: string): string {
  return displayKey(key, defaultAgentId);
}

export function isoTime(ms: unknown): string {
  const n = Number(ms);
  return Number.isFinite(n) && n > 0 ? new Date(n).toISOString().replace(/\.\d{3}Z$/, "Z") : "-";
}
