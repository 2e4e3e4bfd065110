import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import { ensureImage } from '../lib/images/download';
import type { OsName } from '../lib/types';
import { outputStream } from './output';

export interface ImageDeps {
  config: Config;
  client: Client;
}

/** The official cloud image, cached and checksum-verified where `qm importdisk` reads it. */
export function imageActivities({ config, client }: ImageDeps) {
  return {
    async downloadImage(input: { os: OsName; version: string }): Promise<{ path: string; downloaded: boolean }> {
      const ctx = Context.current();
      const out = outputStream(client);
      // Hashing a cached image or waiting on another worker's download reports nothing;
      // the heartbeat says this attempt is alive all the same.
      const alive = setInterval(() => ctx.heartbeat(), 10_000);
      try {
        const image = await ensureImage({
          os: input.os,
          version: input.version,
          dataDir: config.dataDir,
          bases: config.imageBase,
          signal: ctx.cancellationSignal,
          onProgress: (p) => out.line(`[*] downloading: ${p.percent === undefined ? `${p.receivedBytes} bytes` : `${p.percent.toFixed(0)}%`}`),
          onWaitForLock: () => out.line('[*] another worker is downloading this image; waiting for it'),
        });
        out.line(image.downloaded ? `[*] ${image.url} downloaded and verified (${image.algorithm})` : `[*] cached image is current (${image.algorithm} verified)`);
        return { path: image.path, downloaded: image.downloaded };
      } finally {
        clearInterval(alive);
        await out.close();
      }
    },
  };
}
