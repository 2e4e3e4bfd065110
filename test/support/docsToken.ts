import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { REPO_ROOT } from '../../lib/repoRoot';
import type { SandboxCluster } from '../../sandbox/cluster';
import { loadModel, majorOf, nodePveVersion } from '../../sandbox/state/model';

/**
 * The token recipe of docs/proxmox-api.md ("The token and its privileges") for a Proxmox
 * VE release (`9.1`, `8.4`): the ```sh block with the `pveum` commands, as written. The
 * section has one block per major release, each led by a sentence naming it ("On Proxmox
 * VE 9:"); the block for `release`'s major is the one returned.
 */
export function docsTokenRecipe(release: string, file = path.join(REPO_ROOT, 'docs', 'proxmox-api.md')): string {
  const text = fs.readFileSync(file, 'utf8');
  const start = text.indexOf('## The token and its privileges');
  const next = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, next < 0 ? undefined : next);
  const recipes: Array<{ major: number; block: string }> = [];
  let from = 0;
  for (const m of section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    const lead = [...section.slice(from, m.index).matchAll(/Proxmox VE (\d+)/g)].at(-1);
    from = m.index + m[0].length;
    if (lead && /pveum user token add/.test(m[1])) recipes.push({ major: Number(lead[1]), block: m[1] });
  }
  const recipe = recipes.find((r) => r.major === majorOf(release));
  if (!recipe) throw new Error(`no pveum token recipe for Proxmox VE ${release} in ${file} (found ${recipes.map((r) => r.major).join(', ') || 'none'})`);
  return recipe.block;
}

/**
 * Runs the recipe for the release the cluster's main node plays on that node, as an
 * operator pastes it into a root shell there (the sandbox's `pveum`), and returns the
 * token it made, `user@realm!id=secret`, read from the table `pveum user token add` prints.
 */
export async function tokenFromDocs(sandbox: SandboxCluster, recipe = docsTokenRecipe(nodePveVersion(loadModel(sandbox.dir), sandbox.mainNode).release)): Promise<string> {
  const r = await execa('bash', ['-euo', 'pipefail', '-c', recipe], { env: sandbox.envFor(sandbox.mainNode), reject: false });
  if (r.exitCode !== 0) throw new Error(`the token recipe of docs/proxmox-api.md failed (${r.exitCode}): ${r.stderr}`);
  const row = (key: string) => new RegExp(`│ ${key}\\s*│ (\\S+)\\s*│`).exec(r.stdout)?.[1];
  const tokenid = row('full-tokenid');
  const secret = row('value');
  if (!tokenid || !secret) throw new Error(`the token recipe printed no token:\n${r.stdout}`);
  return `${tokenid}=${secret}`;
}
