# The QemuRun API and worker, for running off the cluster (docker-compose.yml): every
# qm/pvesh/pvesm command then goes over SSH to the nodes, the main node included.
#
# The first stage compiles (npm run build: tsc to dist/ and the prebuilt workflow bundle)
# and drops the build tools; the image ships only what runs: node_modules without
# devDependencies, dist/, the OS init scripts, the web console's files. Node.js 24, the current LTS line.

FROM node:24-bookworm-slim AS build
WORKDIR /src
# The Proxmox sandbox is a workspace package (sandbox/): npm ci needs its manifest too.
COPY package.json package-lock.json ./
COPY sandbox/package.json ./sandbox/
RUN npm ci --no-audit --no-fund
COPY . .
# The Proxmox sandbox and the dev scripts are for development and tests: the image runs
# against real nodes (MAIN_NODE). dist/ holds neither (the build compiles the sandbox into
# sandbox/dist, for the service's types, and leaves scripts/ alone); the package and its
# own dependencies leave node_modules with the dev dependencies, once the manifest no
# longer names it (npm counts a workspace's dependencies as the root's own).
RUN npm run build \
 && npm pkg delete workspaces devDependencies.@qemurun/sandbox \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf dist/.tsbuildinfo node_modules/@qemurun

FROM node:24-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/init-scripts ./init-scripts
# The web console: static files the API serves at / as they are (no build step).
COPY --from=build /src/console ./console
# The CLI, for `docker compose exec qemurun bin/qemurun.js list` (it runs dist/cli).
COPY --from=build /src/bin ./bin
# Two malloc arenas and a 4 MB young generation: what keeps the process small (docs/performance.md).
# The API listens on every interface of the container (its loopback is reached by nothing
# outside it); the host decides what reaches the published port (docker-compose.yml).
ENV NODE_ENV=production DATA_DIR=/data MALLOC_ARENA_MAX=2 API_HOST=0.0.0.0
VOLUME /data
EXPOSE 8080
# Readiness, not liveness: "healthy" once Temporal, the worker and every node answer.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/api/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exit 78 is a set-up error (a setting, a port, a key file): restarting will not fix it.
CMD ["node", "--enable-source-maps", "--max-semi-space-size=4", "dist/main.js"]
