# syntax=docker/dockerfile:1
# One image for both roles: `start` (gateway) and `worker`. Build: docker build -t switchboard .

# 1. Build: all dependencies (TypeScript), compile to dist/.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# 2. Production dependencies only.
FROM node:24-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# 3. Runtime: production dependencies, dist/ and the launcher; tini as PID 1 forwards signals to
#    node and reaps zombies; the unprivileged `node` user (uid 1000) owns the state dir.
FROM node:24-bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
# MALLOC_ARENA_MAX=2: fewer malloc arenas, less RSS (bench/deployed.ts; npm start sets it too)
ENV NODE_ENV=production MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=prod-deps --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --chown=node:node package.json switchboard.redis.json5 ./
COPY --chown=node:node bin ./bin
COPY --chown=node:node schema ./schema
RUN mkdir -p /app/.switchboard && chown node:node /app/.switchboard
USER node
VOLUME ["/app/.switchboard"]
EXPOSE 18790
# The gateway answers /healthz without auth; a worker (no HTTP port) checks its heartbeat file.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "bin/healthcheck.js"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--max-semi-space-size=4", "bin/switchboard.js"]
CMD ["start", "--host", "0.0.0.0", "--log-format", "json"]
