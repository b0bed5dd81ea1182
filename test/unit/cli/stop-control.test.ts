import { describe, expect, it } from "vitest";
import { distModule, runFreshNode } from "../../helpers.js";

/**
 * `stopControl` in a fresh node (built dist), driven by real signals to itself: what each signal
 * did, in order. `afterDone`: the stop finishes (done) before the late signal.
 */
function run(afterDone: boolean): Promise<string[]> {
  const script = `
    const { stopControl, SAME_SIGNAL_MS } = await import(${distModule("cli/serve.js")});
    const { silentLogger } = await import(${distModule("log.js")});
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
  return runFreshNode(script, [], 20_000);
}

describe("stopControl", () => {
  it("a signal requests the stop; its copy within SAME_SIGNAL_MS does nothing; a later one forces the exit", async () => {
    expect(await run(false)).toEqual(["requested SIGINT", "copy ignored", "exit 1"]);
  });

  it("once the stop is done, a late signal neither forces an exit nor kills the process", async () => {
    expect(await run(true)).toEqual(["requested SIGINT", "copy ignored"]);
  });
});
