import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import type net from 'node:net';
import { clusterPaths } from '../state/paths';
import { writeFileAtomic } from '../state/files';
import { ensureCertificate } from './cert';
import { handle } from './http';
import { ROUTES } from './routes';
import { taskForker } from './tasks';

/**
 * The sandbox cluster's REST API server (pveproxy's part of it): `node tsrun.js
 * api/server.ts <dir> <host> <port> <authFailureDelayMs> <main node>`. Serves HTTPS with
 * the certificate in the cluster's api directory (made for the main node's name when
 * missing), writes its port to `api.port` there and
 * prints `ready <port>`. It exits when its parent goes (stdin closes) or on SIGTERM;
 * tasks it started run on (they are processes of their own).
 */
const [dirArg, host = '127.0.0.1', portArg = '0', delayArg = '3000', nodeName = 'pve1'] = process.argv.slice(2);
const dir = path.resolve(dirArg ?? '');
const apiDir = clusterPaths(dir).apiDir;
const portFile = path.join(apiDir, 'api.port');
const logFile = path.join(apiDir, 'access.log');
const log = (line: string) => fs.appendFileSync(logFile, `${new Date().toISOString()} ${line}\n`);

async function main(): Promise<void> {
  const { certPem, keyPem } = await ensureCertificate(apiDir, nodeName);
  const tasks = taskForker(dir);
  const server = https.createServer({ cert: certPem, key: keyPem }, (req, res) => {
    res.on('finish', () => log(`${req.socket.remoteAddress} ${req.method} ${req.url?.split('?')[0]} ${res.statusCode}`));
    handle({ dir, routes: ROUTES, authFailureDelayMs: Number(delayArg), log, tasks }, req, res).catch((e) => {
      log(`request failed: ${(e as Error).stack}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  server.listen(Number(portArg), host, () => {
    const { port } = server.address() as net.AddressInfo;
    writeFileAtomic(portFile, `${port}\n`);
    process.stdout.write(`ready ${port}\n`);
  });
  server.on('error', (e) => {
    process.stderr.write(`sandbox API server: ${e.message}\n`);
    process.exit(1);
  });
}

main().catch((e: unknown) => {
  process.stderr.write(`sandbox API server: ${(e as Error).message}\n`);
  process.exit(1);
});

const quit = () => {
  fs.rmSync(portFile, { force: true });
  process.exit(0);
};
process.stdin.resume();
process.stdin.on('end', quit);
process.on('SIGTERM', quit);
