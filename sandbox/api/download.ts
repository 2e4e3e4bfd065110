import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CliError } from '../cli/errors';
import type { Ctx } from '../cli/context';
import { contentFile } from '../cli/storage';

/**
 * The download-url task: PVE::Tools::download_file_from_url, which runs wget into a
 * temporary file beside the target, verifies the checksum, then renames it into place.
 * A file already there with the right checksum is kept ("no need to download").
 */

async function fileHash(algorithm: string, file: string): Promise<string> {
  const hash = createHash(algorithm);
  await pipeline(fs.createReadStream(file), hash);
  return hash.digest('hex');
}

const stamp = (d = new Date()) => d.toISOString().replace('T', ' ').replace(/\..*$/, '');

export async function downloadUrl(ctx: Ctx, p: Record<string, string>, write: (line: string) => void): Promise<void> {
  const target = contentFile(ctx, `${p.storage}:${p.content}/${p.filename}`)!;
  const dest = target.file;
  const algorithm = p['checksum-algorithm'];
  const expected = p.checksum;
  write(`downloading ${p.url} to ${target.shown}`);
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  if (fs.existsSync(dest)) {
    if (!algorithm) throw new CliError(`refusing to override existing file '${target.shown}'`);
    const got = await fileHash(algorithm, dest);
    if (got.toLowerCase() === expected.toLowerCase()) {
      write('calculating checksum of existing file...OK, got correct file already, no need to download');
      return;
    }
    write('calculating checksum of existing file...');
    throw new CliError(`checksum mismatch: got '${got}' != expect '${expected}', aborting`);
  }

  const tmp = `${dest}.tmp_dwnl.${process.pid}`;
  const tmpShown = `${target.shown}.tmp_dwnl.${process.pid}`;
  const wget = `wget --progress=dot:giga -O ${tmpShown} ${p.url}`;
  try {
    write(`--${stamp()}--  ${p.url}`);
    const url = new URL(p.url);
    write(`Connecting to ${url.hostname}:${url.port || (url.protocol === 'https:' ? 443 : 80)}... connected.`);
    let res: Response;
    try {
      res = await fetch(p.url, { redirect: 'follow' });
    } catch (e) {
      write(`failed: ${(e as Error).message}.`);
      throw new CliError(`download failed: command '${wget}' failed: exit code 4`);
    }
    write(`HTTP request sent, awaiting response... ${res.status} ${res.statusText}`);
    if (!res.ok || !res.body) {
      write(`${stamp()} ERROR ${res.status}: ${res.statusText}.`);
      throw new CliError(`download failed: command '${wget}' failed: exit code 8`);
    }
    const length = res.headers.get('content-length');
    write(`Length: ${length ?? 'unspecified'} [${res.headers.get('content-type') ?? 'application/octet-stream'}]`);
    write(`Saving to: '${tmpShown}'`);
    const started = Date.now();
    await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), fs.createWriteStream(tmp));
    const bytes = fs.statSync(tmp).size;
    const secs = Math.max(0.001, (Date.now() - started) / 1000);
    write(`     0K ${'.'.repeat(Math.min(32, Math.ceil(bytes / 1024 / 1024)) || 1)} 100% ${(bytes / secs / 1024 / 1024).toFixed(1)}M=${secs.toFixed(3)}s`);
    write(`${stamp()} (${(bytes / secs / 1024 / 1024).toFixed(1)} MB/s) - '${tmpShown}' saved [${bytes}/${length ?? bytes}]`);
    if (algorithm) {
      const got = await fileHash(algorithm, tmp);
      if (got.toLowerCase() !== expected.toLowerCase()) {
        write('calculating checksum...');
        throw new CliError(`checksum mismatch: got '${got}' != expect '${expected}'`);
      }
      write('calculating checksum...OK, checksum verified');
    }
    fs.renameSync(tmp, dest);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  write(`download of '${p.url}' to '${target.shown}' finished`);
}
