import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../../..");

/**
 * `stopControl` in a fresh node (built dist), driven by real signals to itself: what each signal
 * did, in order. `afterDone`: the stop finishes (done) before the late signal.
 */
function run(afterDone: boolean): string[] {
  const script = `
    const { stopControl, SAME_SIGNAL_MS } = await import(${JSON.stringify(path.join(ROOT, "dist/src/cli/serve.js"))});
    const { silentLogger } = await import(${JSON.stringify(path.join(ROOT, "dist/src/log.js"))});
    const seen = [];
    const c = stopControl(null, silentLogger(), (code) => seen.push("exit " + code));
    const tick = (ms) => new Promise((r) => setTimeout(r, ms));
    c.requested.then((why) => seen.push("requested " + why));
    process.kill(process.pid, "SIGINT");
    await tick(50);
    process.kill(process.pid, "SIGINT"); // the copy npm passes on: the same request
    await tick(50);
    seen.push("copy ignored");
    c.guard();
    if (${afterDone}) c.done();
    await tick(SAME_SIGNAL_MS + 100);
    process.kill(process.pid, "SIGTERM"); // a second request, later
    await tick(50);
    console.log(JSON.stringify(seen));`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { ...process.env, NODE_OPTIONS: "" },
    timeout: 20_000,
  });
  if (r.status !== 0) throw new Error(`exit ${r.status} ${r.signal}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as string[];
}

describe("stopControl", () => {
  it("a signal requests the stop; its copy within SAME_SIGNAL_MS does nothing; a later one forces the exit", () => {
    expect(run(false)).toEqual(["requested SIGINT", "copy ignored", "exit 1"]);
  });

  it("once the stop is done, a late signal neither forces an exit nor kills the process", () => {
    expect(run(true)).toEqual(["requested SIGINT", "copy ignored"]);
  });
});
