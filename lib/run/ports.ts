import net from 'node:net';
import { StartupError } from '../startupError';
import { commandLine, listenerPid } from './procfs';

/** A port the service is about to listen on, and the setting that chooses it. */
export interface PlannedPort {
  host: string;
  port: number;
  setting: string;
  /** What will listen there, for the message. */
  what: string;
}

function tryListen(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', (err) => resolve(err));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve(undefined)));
  });
}

/** Who holds a port, as far as /proc tells: "pid 812, nginx -g daemon off;". */
export function portHolder(port: number): string {
  const pid = listenerPid(port);
  return pid === undefined ? 'another program' : `pid ${pid} (${commandLine(pid)})`;
}

/**
 * Checks, before anything is started, that every port the service needs is free. Leftovers
 * of our own previous run are stopped before this (RunRecords), so a port still taken
 * belongs to another program: a StartupError naming it and the setting to change.
 */
export async function checkPortsFree(ports: PlannedPort[]): Promise<void> {
  const problems: string[] = [];
  for (const p of ports) {
    const err = await tryListen(p.host, p.port);
    if (!err) continue;
    if (err.code === 'EADDRINUSE') {
      problems.push(`${p.host}:${p.port} (${p.what}) is in use by ${portHolder(p.port)}: stop it or set ${p.setting} to a free port`);
    } else if (err.code === 'EACCES') {
      problems.push(`${p.host}:${p.port} (${p.what}) needs privileges this user lacks: set ${p.setting} to a port above 1023`);
    } else {
      problems.push(`${p.host}:${p.port} (${p.what}) cannot be used (${err.code ?? err.message}): check ${p.setting}`);
    }
  }
  if (problems.length > 0) throw new StartupError(problems.join('\n'));
}
