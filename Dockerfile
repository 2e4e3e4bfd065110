# The QemuRun API and worker, for running off the cluster (docker-compose.yml): every
# qm/pvesh/pvesm command then goes over SSH to the nodes, the main node included.
FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
ENV DATA_DIR=/data
VOLUME /data
EXPOSE 8080
CMD ["npm", "start"]
