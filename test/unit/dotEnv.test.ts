import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const REPO = path.resolve(__dirname, '../..');

/** What the entry points see of SETTING_A and SETTING_B after importing lib/dotEnv, run in `cwd`. */
function settingsIn(cwd: string, env: Record<string, string> = {}): unknown {
  const script = `require(${JSON.stringify(path.join(REPO, 'lib/dotEnv.ts'))}); console.log(JSON.stringify([process.env.SETTING_A ?? null, process.env.SETTING_B ?? null]))`;
  const out = execFileSync(process.execPath, ['-r', require.resolve('ts-node/register/transpile-only'), '-e', script], {
    cwd,
    env: { PATH: process.env.PATH ?? '', TS_NODE_PROJECT: path.join(REPO, 'tsconfig.json'), ...env },
    encoding: 'utf8',
  });
  return JSON.parse(out);
}

test('a .env in the working directory fills in settings the environment does not set; none is fine', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-dotenv-'));
  try {
    expect(settingsIn(dir)).toEqual([null, null]);
    fs.writeFileSync(path.join(dir, '.env'), '# the operator\'s settings\nSETTING_A=from-file\nSETTING_B="quoted value"\n');
    expect(settingsIn(dir, { SETTING_A: 'from-environment' })).toEqual(['from-environment', 'quoted value']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
