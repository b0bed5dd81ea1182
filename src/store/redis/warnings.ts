import { SwitchboardError } from "../../errors.js";

export { WarningSink } from "../warnings.js";

/** Throws once a part of the store was closed. */
export function assertOpen(closed: boolean, part: string): void {
  if (closed) throw new SwitchboardError("UNAVAILABLE", `redis store is closed (${part})`);
}
