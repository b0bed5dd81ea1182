import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { registry } from "../../../src/telemetry/index.js";

/** The Grafana dashboard in docs/ queries only metrics the registry exports (issue 51). */
describe("docs/grafana/switchboard.json", () => {
  it("is a dashboard whose queries name exported switchboard metrics", async () => {
    const file = path.resolve(import.meta.dirname, "../../../docs/grafana/switchboard.json");
    const dash = JSON.parse(readFileSync(file, "utf8")) as {
      panels: Array<{ targets: Array<{ expr: string }> }>;
    };
    const exported = new Set((await registry.getMetricsAsJSON()).map((m) => m.name));
    const used = new Set<string>();
    for (const p of dash.panels)
      for (const t of p.targets)
        for (const m of t.expr.matchAll(/\bswitchboard_[a-z_]+/g)) used.add(m[0].replace(/_bucket$/, ""));
    expect(used.size).toBeGreaterThanOrEqual(8);
    for (const name of used) expect(exported, name).toContain(name);
  });
});
