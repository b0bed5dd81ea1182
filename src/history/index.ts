/** The history layer: strip (assistant scaffolding), bound (one field), view (a bounded, safe list). */

export { maskSecret, redactSecrets, redactText } from "../redact.js";
export * from "./bound.js";
export * from "./read.js";
export * from "./strip.js";
export * from "./view.js";
