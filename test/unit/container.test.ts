import { spawn, spawnSync } from "node:child_process";
import { readFileSync, utimesSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { DEPLOYED_ENV, DEPLOYED_NODE_FLAGS } from "../../bench/deployed.js";
import { tempDir } from "../helpers.js";

/**
 * Docker is not available here, so the container files are checked for the invariants that make
 * them work (issue 14, item 2): a multi-stage image with production dependencies, a non-root
 * user, an init that forwards signals and a health check; a compose file that builds that one
 * image for gateway and workers, bind-mounts no source, installs nothing at start, checks the
 * health of every service and reads the token from an env file.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");

interface Instruction {
  op: string;
  args: string;
}

/** Dockerfile instructions by stage (line continuations joined, comments dropped). */
function dockerfileStages(text: string): Array<{ from: string; name?: string; steps: Instruction[] }> {
  const joined = text.replace(/\\\n/g, " ");
  const stages: Array<{ from: string; name?: string; steps: Instruction[] }> = [];
  for (const raw of joined.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = /^(\S+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const op = (m[1] ?? "").toUpperCase();
    const args = m[2] ?? "";
    if (op === "FROM") {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?/i.exec(args);
      stages.push({ from: f?.[1] ?? "", ...(f?.[2] ? { name: f[2] } : {}), steps: [] });
    } else stages.at(-1)?.steps.push({ op, args });
  }
  return stages;
}

function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  expect(Array.isArray(parsed), `not exec form: ${args}`).toBe(true);
  return parsed as string[];
}

type Service = {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  entrypoint?: unknown;
  volumes?: Array<string | { type?: string; source?: string }>;
  env_file?: unknown;
  secrets?: unknown;
  environment?: Record<string, string>;
  healthcheck?: { test?: string[] | string; disable?: boolean };
  ports?: string[];
  container_name?: string;
};

const compose = parse(readFileSync(path.join(ROOT, "docker-compose.yml"), "utf8"), { merge: true }) as {
  services: Record<string, Service>;
};
const stages = dockerfileStages(readFileSync(path.join(ROOT, "Dockerfile"), "utf8"));

describe("Dockerfile", () => {
  const runtime = stages.at(-1);
  const steps = (op: string) => runtime?.steps.filter((s) => s.op === op) ?? [];

  it("builds every stage on Node 24 LTS (node:24-bookworm-slim), not the unsupported Node 20", () => {
    expect(stages.length).toBeGreaterThanOrEqual(3);
    for (const stage of stages)
      expect(stage.from, `stage ${stage.name ?? "?"}`).toBe("node:24-bookworm-slim");
  });

  it("builds in one stage with dev dependencies and runs with production dependencies and dist/ only", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const build = stages.find((s) => s.steps.some((i) => i.op === "RUN" && /npm run build/.test(i.args)));
    expect(build, "a stage runs npm run build").toBeDefined();
    expect(build?.steps.some((i) => i.op === "RUN" && /npm ci(?!.*--omit=dev)/.test(i.args))).toBe(true);
    const prodDeps = stages.find((s) =>
      s.steps.some((i) => i.op === "RUN" && /npm ci .*--omit=dev/.test(i.args)),
    );
    expect(prodDeps, "a stage installs production dependencies only").toBeDefined();
    const copies = steps("COPY").map((c) => c.args);
    expect(copies.some((c) => c.includes(`--from=${prodDeps?.name}`) && /node_modules/.test(c))).toBe(true);
    expect(copies.some((c) => c.includes(`--from=${build?.name}`) && /\/app\/dist/.test(c))).toBe(true);
    // no install or build at run time, and no copy of the whole tree into the runtime
    expect(steps("RUN").some((r) => /npm (ci|install)|npm run build/.test(r.args))).toBe(false);
    expect(copies.some((c) => /^(--chown=\S+\s+)?\.\s/.test(c))).toBe(false);
  });

  it("runs as a non-root user under an init that forwards signals to node, never through npm", () => {
    const users = steps("USER");
    expect(users.length).toBeGreaterThan(0);
    expect(users.at(-1)?.args).not.toMatch(/^(root|0)(:|$)/);
    const entry = execForm(steps("ENTRYPOINT").at(-1)?.args ?? "[]");
    expect(entry[0]).toMatch(/(^|\/)(tini|dumb-init)$/);
    expect(steps("RUN").some((r) => /apt-get install .*\b(tini|dumb-init)\b/.test(r.args))).toBe(true);
    const argv = [...entry, ...execForm(steps("CMD").at(-1)?.args ?? "[]")];
    expect(argv).toContain("node");
    expect(argv.join(" ")).not.toMatch(/\bnpm\b|\bsh -c\b/);
  });

  it("runs node with the flags and environment npm start uses and the benches measure", () => {
    const deployed = Object.entries(DEPLOYED_ENV).map(([k, v]) => `${k}=${v}`);
    // the image: ENV (either `K=V …` form) and the ENTRYPOINT's node flags
    const env = steps("ENV").flatMap((e) => e.args.split(/\s+/));
    for (const kv of deployed) expect(env, "Dockerfile ENV").toContain(kv);
    const entry = execForm(steps("ENTRYPOINT").at(-1)?.args ?? "[]");
    const node = entry.indexOf("node");
    expect(entry.slice(node + 1, node + 1 + DEPLOYED_NODE_FLAGS.length)).toEqual(DEPLOYED_NODE_FLAGS);
    // npm start: `K=V … exec node <flags> bin/switchboard.js start`
    const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
    };
    const start = (pkg.scripts.start ?? "").split(/\s+/);
    const exec = start.indexOf("exec");
    expect(start.slice(0, exec).sort()).toEqual([...deployed].sort());
    expect(start.slice(exec + 1)).toEqual(["node", ...DEPLOYED_NODE_FLAGS, "bin/switchboard.js", "start"]);
  });

  it("has a HEALTHCHECK on /healthz", () => {
    const hc = steps("HEALTHCHECK").at(-1)?.args ?? "";
    expect(hc).toMatch(/CMD/);
    const script = readFileSync(path.join(ROOT, "bin/healthcheck.js"), "utf8");
    expect(
      hc.includes("/healthz") || (hc.includes("bin/healthcheck.js") && script.includes("/healthz")),
    ).toBe(true);
  });

  it(".dockerignore keeps host node_modules, dist and state out of the build", () => {
    const ignored = readFileSync(path.join(ROOT, ".dockerignore"), "utf8").split("\n");
    for (const p of ["node_modules", "dist", ".switchboard", ".git"]) expect(ignored).toContain(p);
  });
});

describe("docker-compose.yml", () => {
  const { gateway, worker, redis } = compose.services;

  it("gateway and worker run the same built image, with nothing installed at start", () => {
    expect(gateway?.image).toBeDefined();
    expect(gateway?.image).toBe(worker?.image);
    expect(gateway?.build).toEqual(worker?.build);
    expect(gateway?.build).toBeDefined();
    for (const s of [gateway, worker]) {
      const command = Array.isArray(s?.command) ? s.command.join(" ") : String(s?.command ?? "");
      expect(command).not.toMatch(/\bnpm\b|\bsh\b|install|build/);
      expect(s?.entrypoint).toBeUndefined();
    }
  });

  it("bind-mounts no source: only named volumes", () => {
    for (const [name, s] of Object.entries(compose.services))
      for (const v of s.volumes ?? []) {
        const source = typeof v === "string" ? v.split(":")[0] : v.source;
        expect(source, `${name}: ${JSON.stringify(v)}`).toMatch(/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/);
        if (typeof v !== "string") expect(v.type).not.toBe("bind");
      }
  });

  it("checks the health of gateway, workers and Redis", () => {
    for (const [name, s] of Object.entries({ gateway, worker, redis })) {
      expect(s?.healthcheck?.test, name).toBeDefined();
      expect(s?.healthcheck?.disable, name).not.toBe(true);
    }
    expect(JSON.stringify(worker?.healthcheck?.test)).toContain("healthcheck.js");
    expect(worker?.environment?.SWITCHBOARD_HEARTBEAT_FILE).toBeDefined();
    expect(JSON.stringify(worker?.command)).toContain(worker?.environment?.SWITCHBOARD_HEARTBEAT_FILE);
  });

  it("Redis never evicts and fsyncs every write", () => {
    const cmd = (Array.isArray(redis?.command) ? redis.command : String(redis?.command).split(/\s+/)).map(
      String,
    );
    const arg = (flag: string) => cmd[cmd.indexOf(flag) + 1];
    expect(arg("--appendonly")).toBe("yes");
    expect(arg("--appendfsync")).toBe("always");
    expect(arg("--maxmemory-policy")).toBe("noeviction");
  });

  it("reads the token from an env file, never inline; workers can scale", () => {
    for (const s of [gateway, worker]) {
      expect(s?.env_file ?? s?.secrets).toBeDefined();
      expect(s?.environment?.SWITCHBOARD_TOKEN).toBeUndefined();
    }
    expect(JSON.stringify(gateway?.env_file)).toContain(".env.switchboard");
    expect(readFileSync(path.join(ROOT, ".gitignore"), "utf8")).toMatch(/^\.env\.\*$/m);
    expect(worker?.ports).toBeUndefined();
    expect(worker?.container_name).toBeUndefined();
    const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
    expect(readme).toContain(".env.switchboard");
    expect(readme).toContain("--scale worker=");
  });
});

describe("bin/healthcheck.js", () => {
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, [path.join(ROOT, "bin/healthcheck.js")], {
      env: { PATH: process.env.PATH ?? "", ...env },
      timeout: 10_000,
    }).status;

  it("passes on a live /healthz and fails on a closed port", async () => {
    const server = createServer((req, res) => {
      res.statusCode = req.url === "/healthz" ? 200 : 404;
      res.end('{"ok":true}');
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const { port } = server.address() as AddressInfo;
    // spawn, not spawnSync: this process's event loop serves the request
    const ok = await new Promise<number | null>((resolve) => {
      const c = spawn(process.execPath, [path.join(ROOT, "bin/healthcheck.js")], {
        env: { PATH: process.env.PATH ?? "", SWITCHBOARD_HEALTH_URL: `http://127.0.0.1:${port}/healthz` },
      });
      c.on("exit", (code) => resolve(code));
    });
    await new Promise<void>((r) => server.close(() => r()));
    expect(ok).toBe(0);
    expect(run({ SWITCHBOARD_HEALTH_URL: `http://127.0.0.1:${port}/healthz` })).toBe(1);
  });

  it("checks a worker's heartbeat file by age", () => {
    const t = tempDir();
    const file = path.join(t.dir, "hb");
    expect(run({ SWITCHBOARD_HEARTBEAT_FILE: file })).toBe(1);
    writeFileSync(file, "1\n");
    expect(run({ SWITCHBOARD_HEARTBEAT_FILE: file })).toBe(0);
    const old = new Date(Date.now() - 120_000);
    utimesSync(file, old, old);
    expect(run({ SWITCHBOARD_HEARTBEAT_FILE: file })).toBe(1);
    t.cleanup();
  });
});
