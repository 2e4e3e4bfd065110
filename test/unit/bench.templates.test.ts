import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildTemplate, pathOf, ratioOf, spread } from '../../scripts/bench/templates';
import type { InstallRun } from '../../scripts/bench/installs';

/** A stand-in for the API's template routes: the 202 of POST /api/templates, then the build's stream. */
async function fakeApi(status: number, messages: Array<[string, string]>): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/api/templates') {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(status === 202 ? { workflowId: 'template-debian-12', events: '/api/workflows/template-debian-12/events' } : { error: 'no' }));
      return;
    }
    if (req.method === 'GET' && req.url === '/api/workflows/template-debian-12/events') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      messages.forEach(([s, message], i) => res.write(`id: ${i + 1}\ndata: ${JSON.stringify({ step: 'template', status: s, message })}\n\n`));
      res.end('event: close\ndata: {}\n\n');
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(() => r())) };
}

describe('template bench', () => {
  test('a build is done at its final [+] template event', async () => {
    const api = await fakeApi(202, [['info', '[*] importing the image'], ['success', '[+] template 9000 ready in 12.00s']]);
    try {
      const build = await buildTemplate(api.url, 5000);
      expect(build).toMatchObject({ workflowId: 'template-debian-12', ok: true, outcome: '[+] template 9000 ready in 12.00s' });
    } finally {
      await api.close();
    }
  });

  test('a refused POST or a stream without the final event is a failed build, saying why', async () => {
    const refused = await fakeApi(404, []);
    try {
      expect(await buildTemplate(refused.url, 5000)).toMatchObject({ ok: false, outcome: expect.stringMatching(/^POST \/api\/templates answered 404/) });
    } finally {
      await refused.close();
    }
    const failed = await fakeApi(202, [['error', 'qm template failed']]);
    try {
      expect(await buildTemplate(failed.url, 5000)).toMatchObject({ ok: false, outcome: 'qm template failed' });
    } finally {
      await failed.close();
    }
  });

  test('median, min and max, and the ratio of the medians', () => {
    expect(spread([3, 1, 2])).toEqual({ median: 2, min: 1, max: 3 });
    expect(spread([4, 1, 2, 3])).toEqual({ median: 2.5, min: 1, max: 4 });
    expect(ratioOf(spread([400, 360, 380]), spread([90, 100, 95]))).toBe(4);
  });

  test('the path an install took, from its events', () => {
    const run = (messages: string[]) => ({ messages }) as InstallRun;
    expect(pathOf(run(['[*] installing as a linked clone of template qr-tpl-debian-12 (VMID 9000, built 2026-12-03T12:00:00Z)']))).toBe('template');
    expect(pathOf(run(['[*] building from the cloud image, as asked (source "image")']))).toBe('image');
    expect(pathOf(run(['[*] building from the cloud image: no template of debian 12']))).toBe('image');
  });
});
