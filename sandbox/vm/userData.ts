import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { spawnInJail, userPath } from './jail';

/**
 * What a process guest makes of a `cicustom` user snippet (sandbox/cli/qm/cicustom.ts reads
 * it at start): the account, keys, password and host name cloud-init would set, and, on the
 * first boot, `write_files` and `runcmd`. Not modelled: `packages` and `package_upgrade`
 * (a process guest has no package manager; they are logged), `bootcmd`, users beyond the
 * one `user`, and every other module. Real guests (SANDBOX_GUESTS=qemu) run cloud-init itself.
 */
export interface SnippetUserData {
  user?: string;
  keys: string[];
  passwordHash?: string;
  hostname?: string;
  writeFiles: Array<{ path: string; content: string; permissions?: string; append?: boolean }>;
  runcmd: Array<string | string[]>;
  packages: string[];
}

/** The snippet's keys a process guest acts on; undefined when it is not a mapping. */
export function readSnippetUserData(text: string): SnippetUserData | undefined {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch {
    return undefined;
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return undefined;
  const d = doc as Record<string, unknown>;
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  return {
    user: str(d.user),
    keys: list(d.ssh_authorized_keys).filter((k): k is string => typeof k === 'string'),
    passwordHash: str(d.password),
    hostname: str(d.hostname),
    writeFiles: list(d.write_files).flatMap((f) => {
      const w = f as Record<string, unknown>;
      if (!w || typeof w.path !== 'string') return [];
      const raw = typeof w.content === 'string' ? w.content : '';
      const content = w.encoding === 'b64' || w.encoding === 'base64' ? Buffer.from(raw, 'base64').toString('utf8') : raw;
      return [{ path: w.path, content, permissions: str(w.permissions), append: w.append === true }];
    }),
    runcmd: list(d.runcmd).filter((c): c is string | string[] => typeof c === 'string' || (Array.isArray(c) && c.every((a) => typeof a === 'string'))),
    packages: list(d.packages).map((p) => (Array.isArray(p) ? p.join('=') : String(p))),
  };
}

/** cloud-init's write_files: as root, default mode 0644; a path outside the guest's root is skipped. */
export function applyWriteFiles(root: string, files: SnippetUserData['writeFiles'], log: (line: string) => void): void {
  for (const f of files) {
    const target = path.resolve(root, `.${path.posix.resolve('/', f.path)}`);
    if (!target.startsWith(root + path.sep)) continue;
    fs.mkdirSync(path.dirname(target), { recursive: true });
    if (f.append) fs.appendFileSync(target, f.content);
    else fs.writeFileSync(target, f.content);
    fs.chmodSync(target, f.permissions ? parseInt(f.permissions, 8) : 0o644);
    log(`cloud-init: write_files ${f.path}`);
  }
}

/** cloud-init's runcmd: each entry as root, a string through `sh -c`, a list as argv, in order; a failure does not stop the rest. */
export async function applyRuncmd(root: string, hostname: string, privilegedLog: string, cmds: SnippetUserData['runcmd'], log: (line: string) => void): Promise<void> {
  for (const cmd of cmds) {
    const argv = typeof cmd === 'string' ? ['/bin/sh', '-c', cmd] : cmd;
    const child = spawnInJail({
      root,
      hostname,
      privilegedLog,
      user: { name: 'root', uid: 0, home: '/root' },
      env: { PATH: userPath(0), HOME: '/root', USER: 'root', LANG: 'C.UTF-8' },
      argv,
    });
    child.stdin?.end();
    child.stdout?.resume();
    child.stderr?.resume();
    const code = await new Promise<number | null>((resolve) => {
      child.on('exit', (c) => resolve(c));
      child.on('error', () => resolve(null));
    });
    log(`cloud-init: runcmd exited ${code ?? 'abnormally'}`);
  }
}
