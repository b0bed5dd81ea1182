#!/usr/bin/env node
// Container health check (Dockerfile HEALTHCHECK, docker-compose.yml), dependency-free.
//   gateway: GET /healthz on SWITCHBOARD_HEALTH_URL (default http://127.0.0.1:18790/healthz)
//   worker:  with SWITCHBOARD_HEARTBEAT_FILE set, that file was touched within SWITCHBOARD_HEARTBEAT_MAX_AGE_S
//            (default 30) seconds — `switchboard worker --heartbeat FILE` touches it every 5 s.
import { statSync } from "node:fs";

const file = process.env.SWITCHBOARD_HEARTBEAT_FILE;
if (file) {
  const maxAgeMs = Number(process.env.SWITCHBOARD_HEARTBEAT_MAX_AGE_S ?? 30) * 1000;
  try {
    const age = Date.now() - statSync(file).mtimeMs;
    process.exit(age <= maxAgeMs ? 0 : 1);
  } catch {
    process.exit(1);
  }
} else {
  const url = process.env.SWITCHBOARD_HEALTH_URL ?? "http://127.0.0.1:18790/healthz";
  fetch(url, { signal: AbortSignal.timeout(4000) }).then(
    (r) => process.exit(r.ok ? 0 : 1),
    () => process.exit(1),
  );
}
