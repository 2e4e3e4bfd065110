import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { REPO_ROOT } from '../../lib/repoRoot';
import type { SandboxCluster } from '../../sandbox/cluster';

/**
 * The token recipe of docs/proxmox-api.md ("The token and its privileges"): the ```sh
 * block with the `pveum` commands, as written.
 */
export function docsTokenRecipe(file = path.join(REPO_ROOT, 'docs', 'proxmox-api.md')): string {
  const text = fs.readFileSync(file, 'utf8');
  const section = text.slice(text.indexOf('## The token and its privileges'));
  const block = /^```sh\n([\s\S]*?)^```$/m.exec(section);
  if (!block || !/pveum user token add/.test(block[1])) throw new Error(`no pveum token recipe in ${file}`);
  return block[1];
}

/**
 * Runs the recipe on the cluster's main node, as an operator pastes it into a root shell
 * there (the sandbox's `pveum`), and returns the token it made, `user@realm!id=secret`,
 * read from the table `pveum user token add` prints.
 */
export async function tokenFromDocs(sandbox: SandboxCluster, recipe = docsTokenRecipe()): Promise<string> {
  const r = await execa('bash', ['-euo', 'pipefail', '-c', recipe], { env: sandbox.envFor(sandbox.mainNode), reject: false });
  if (r.exitCode !== 0) throw new Error(`the token recipe of docs/proxmox-api.md failed (${r.exitCode}): ${r.stderr}`);
  const row = (key: string) => new RegExp(`│ ${key}\\s*│ (\\S+)\\s*│`).exec(r.stdout)?.[1];
  const tokenid = row('full-tokenid');
  const secret = row('value');
  if (!tokenid || !secret) throw new Error(`the token recipe printed no token:\n${r.stdout}`);
  return `${tokenid}=${secret}`;
}
