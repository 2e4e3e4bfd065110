import { initScriptFor, listInitScripts } from '../../lib/initScripts';
import { startHarness, Harness } from '../support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.stop();
});

test('every OS init script is served at /sh/<os>_<version>.sh, as the seed did', async () => {
  const base = h.service.url;
  for (const s of listInitScripts()) {
    const res = await fetch(`${base}/sh/${s.file}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/x-shellscript/);
    expect(await res.text()).toBe(initScriptFor(s.os, s.version));
  }
  const missing = await fetch(`${base}/sh/windows_11.sh`);
  expect(missing.status).toBe(404);
  expect(((await missing.json()) as { message: string }).message).toMatch(/no init script windows_11\.sh/);
});
