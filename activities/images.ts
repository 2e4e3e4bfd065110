import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { ensureImage } from '../lib/images/download';
import type { OsName } from '../contract';
import fs from 'node:fs';
import path from 'node:path';
import type { NodeExecutor } from '../lib/executor/types';
import { outputStream } from './output';
import type { Metrics } from '../lib/observability/metrics';
import { copyDir, pruneOlderCopies, touchCopy } from '../lib/images/nodeCopies';
import { asApiNode, type ProxmoxCluster } from '../lib/proxmox';
import { imageFor } from '../lib/images/catalog';
import { ensureImageOnNode } from '../lib/images/onNode';
import { recordedTask } from './tasks';

export interface ImageDeps {
  config: Config;
  client: Client;
  executors: Record<string, NodeExecutor>;
  proxmox: ProxmoxCluster;
  metrics?: Metrics;
}

/**
 * The official cloud image, checksum-verified where the disk import reads it: cached by the
 * service and (off the cluster) copied to the main node in CLI mode; fetched by the main
 * node itself in API mode.
 */
export function imageActivities({ config, client, executors, proxmox, metrics }: ImageDeps) {
  const apiMain = () => {
    const node = proxmox.node(config.mainNode);
    return node ? asApiNode(node) : undefined;
  };

  /** API mode: the main node downloads the image into PROXMOX_IMAGE_STORAGE (content import). */
  async function downloadOnNode(input: { os: OsName; version: string }) {
    const node = apiMain()!;
    const storage = config.proxmoxApi!.imageStorage;
    const task = recordedTask();
    const out = outputStream(client);
    try {
      if (task.resumeTask) out.line(`[*] following the download task the previous attempt started (${task.resumeTask})`);
      const image = await ensureImageOnNode(node, storage, imageFor(input.os, input.version, config.imageBase), {
        ...task,
        signal: Context.current().cancellationSignal,
        onLine: (line) => out.line(line),
      });
      out.line(
        image.downloaded
          ? `[*] ${config.mainNode} downloaded ${image.volid} and verified it (${image.algorithm})`
          : `[*] ${image.volid} is on ${config.mainNode} already (same release)`,
      );
      // The node downloaded it: a miss for this release, but no bytes through the service.
      metrics?.imageCache.inc({ result: image.downloaded ? 'miss' : 'hit' });
      return { path: image.volid, sha: image.sha, downloaded: image.downloaded };
    } finally {
      await out.close();
    }
  }
  /** The image in this worker's cache: stageImage's fallback when another worker downloaded it. */
  const fetchImage = (os: OsName, version: string) =>
    ensureImage({ os, version, dataDir: config.dataDir, bases: config.imageBase, signal: Context.current().cancellationSignal });

  return {
    /**
     * `qm importdisk` reads the image on the main node. When the service runs there, the
     * cached file is already in place; off the cluster (docker-compose) it is copied over
     * SFTP once, under a name carrying its checksum, so a changed image is copied again
     * and the copies of earlier releases are pruned.
     */
    async stageImage(input: { path: string; sha: string; os?: OsName; version?: string }): Promise<string> {
      // API mode: the image is on the node's storage already (downloadImage).
      if (apiMain()) return input.path;
      const main = executors[config.mainNode];
      const putFile = main.putFile?.bind(main);
      if (!putFile) return input.path;
      const ctx = Context.current();
      const fileName = path.basename(input.path);
      const present = await main.run(['test', '-f', `${copyDir(config.nodeImageDir, input.sha)}/${fileName}`]);
      if (present.exitCode === 0) {
        const remote = `${copyDir(config.nodeImageDir, input.sha)}/${fileName}`;
        await touchCopy(main, remote);
        return remote;
      }
      // Another worker downloaded the image (and died, or stopped) into its own cache:
      // this worker fetches it into its own before copying.
      const local = fs.existsSync(input.path) || !input.os || !input.version ? input : await fetchImage(input.os, input.version);
      const dir = copyDir(config.nodeImageDir, local.sha);
      const remote = `${dir}/${fileName}`;
      await main.run(['mkdir', '-p', '--', dir]);
      const out = outputStream(client);
      let lastPercent = -1;
      try {
        await putFile(local.path, remote, {
          signal: ctx.cancellationSignal,
          onProgress: (sent, total) => {
            const percent = Math.floor((sent / total) * 100);
            if (percent >= lastPercent + 5) {
              lastPercent = percent;
              out.line(`[*] copying the image to ${config.mainNode}: ${percent}%`);
            }
          },
        });
        const pruned = await pruneOlderCopies(main, config.nodeImageDir, local.sha, fileName);
        if (pruned.length > 0) out.line(`[*] removed ${pruned.length} older cop${pruned.length === 1 ? 'y' : 'ies'} of ${fileName} from ${config.mainNode}`);
      } finally {
        await out.close();
      }
      return remote;
    },

    async downloadImage(input: { os: OsName; version: string }): Promise<{ path: string; sha: string; downloaded: boolean }> {
      if (apiMain()) return downloadOnNode(input);
      const ctx = Context.current();
      const out = outputStream(client);
      try {
        // Hashing a cached image or waiting on another worker's download reports nothing:
        // the heartbeats of every activity (heartbeating, activities/index.ts) say it is alive.
        const image = await ensureImage({
          os: input.os,
          version: input.version,
          dataDir: config.dataDir,
          bases: config.imageBase,
          signal: ctx.cancellationSignal,
          onProgress: (p) => out.line(`[*] downloading: ${p.percent === undefined ? `${p.receivedBytes} bytes` : `${p.percent.toFixed(0)}%`}`),
          onWaitForLock: () => out.line('[*] another worker is downloading this image; waiting for it'),
        });
        metrics?.imageCache.inc({ result: image.downloaded ? 'miss' : 'hit' });
        if (image.downloaded) metrics?.imageBytes.inc(image.bytes);
        out.line(image.downloaded ? `[*] ${image.url} downloaded and verified (${image.algorithm})` : `[*] cached image is current (${image.algorithm} verified)`);
        return { path: image.path, sha: image.sha, downloaded: image.downloaded };
      } finally {
        await out.close();
      }
    },
  };
}
