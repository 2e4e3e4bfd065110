import crypto from 'node:crypto';
import type { Payload } from '@temporalio/common';
import { CodecServer, startCodecServer } from '../fixtures/codec/codecServer';
import { codecWith, fromPayload, metaText, randomKey, toPayload } from '../fixtures/codec/keys';

const json = (p: Payload) => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  data: Buffer.from(p.data ?? []).toString('base64'),
});
const fromJson = (p: { metadata: Record<string, string>; data: string }): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data, 'base64'),
});

describe('codec router over HTTP', () => {
  const codec = codecWith([['k1', randomKey()]]);
  let server: CodecServer;
  beforeAll(async () => {
    server = await startCodecServer(codec);
  });
  afterAll(() => server.close());

  const post = (op: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.endpoint}/${op}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Namespace': 'default', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  test('decodes what the codec encoded', async () => {
    const secret = `s3cret-${crypto.randomUUID()}`;
    const encoded = await codec.encode([toPayload({ secret }), toPayload('two')]);
    const res = await post('decode', { payloads: encoded.map(json) });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as { payloads: Array<{ metadata: Record<string, string>; data: string }> };
    expect(body.payloads.map(fromJson).map((p) => fromPayload(p))).toEqual([{ secret }, 'two']);
  });

  test('takes bodies up to 256 KiB: the largest payload the service writes decodes, a larger body is 413', async () => {
    // An install input with the most userData a request may carry (64 KiB): over 64 KiB once
    // encrypted and in base64, so the API's own 64 KiB would refuse the UI its history.
    const install = { spec: { os: 'debian', version: '12', user: 'debian' }, secrets: { userData: `#cloud-config\n${'x'.repeat(65_536 - 14)}` }, mainNode: 'pve1' };
    const body = JSON.stringify({ payloads: (await codec.encode([toPayload(install)])).map(json) });
    expect(Buffer.byteLength(body)).toBeGreaterThan(64 * 1024);
    expect((await post('decode', body)).status).toBe(200);
    const big = await post('decode', { payloads: [{ metadata: {}, data: 'A'.repeat(257 * 1024) }] });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { message: string }).message).toMatch(/256 KiB/);
  });

  test('encodes nothing: a caller cannot make payloads the workers would accept', async () => {
    const res = await post('encode', { payloads: [json(toPayload({ vmid: 240, cores: 7 }))] });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { message: string }).message).toMatch(/only decodes/);
  });

  test('decodes for people: secrets, wherever they sit, come back as "<redacted>"', async () => {
    const install = { spec: { os: 'debian', version: '12', user: 'debian' }, secrets: { passwd: 'UiS3cret!', rootPassword: 'R00t!' }, mainNode: 'pve1' };
    const activity = { vmid: 120, passwd: 'UiS3cret!', mainKey: 'ssh-ed25519 AAAA', userData: '#cloud-config\nruncmd: [echo Ud-S3cret]\n' };
    const schedule = [{ vmid: 121, spec: { os: 'debian' }, passwd: 'Sched!' }];
    const encoded = await codec.encode([toPayload(install), toPayload(activity), toPayload(schedule), toPayload({ rootPassword: 'R00t!' })]);
    const res = await post('decode', { payloads: encoded.map(json) });
    const text = await res.text();
    for (const secret of ['UiS3cret!', 'R00t!', 'Sched!', 'Ud-S3cret']) expect(text.includes(Buffer.from(secret).toString('base64'))).toBe(false);
    const body = JSON.parse(text) as { payloads: Array<{ metadata: Record<string, string>; data: string }> };
    expect(body.payloads.map(fromJson).map((p) => fromPayload(p))).toEqual([
      { ...install, secrets: '<redacted>' },
      { ...activity, passwd: '<redacted>', userData: '<redacted>' },
      [{ ...schedule[0], passwd: '<redacted>' }],
      { rootPassword: '<redacted>' },
    ]);
    // What a worker decodes in process is untouched.
    expect(fromPayload((await codec.decode(encoded))[0])).toEqual(install);
  });

  test('accepts proto-JSON with empty fields left out', async () => {
    const res = await post('decode', { payloads: [{ metadata: { encoding: Buffer.from('binary/null').toString('base64') } }, {}] });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      payloads: [{ metadata: { encoding: Buffer.from('binary/null').toString('base64') }, data: '' }, { metadata: {}, data: '' }],
    });
  });

  test('answers a preflight from an allowed origin with the CORS the UI needs', async () => {
    for (const origin of ['http://localhost:8233', 'http://127.0.0.1:8233']) {
      const res = await fetch(`${server.endpoint}/decode`, {
        method: 'OPTIONS',
        headers: { Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type,x-namespace' },
      });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe(origin);
      expect(res.headers.get('access-control-allow-credentials')).toBe('true');
      expect(res.headers.get('access-control-allow-methods')).toBe('POST, OPTIONS');
      expect(res.headers.get('access-control-allow-headers')).toBe('Content-Type, X-Namespace, Authorization');
      expect(res.headers.get('vary')).toMatch(/Origin/);
    }
    // The actual POST from the UI carries the header too, or the browser hides the answer.
    const res = await post('decode', { payloads: [] }, { Origin: 'http://localhost:8233' });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('http://localhost:8233');
  });

  test('refuses a foreign origin: no ACAO header', async () => {
    const pre = await fetch(`${server.endpoint}/decode`, {
      method: 'OPTIONS',
      headers: { Origin: 'http://evil.example:8233', 'Access-Control-Request-Method': 'POST' },
    });
    expect(pre.status).toBe(403);
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();

    const res = await post('decode', { payloads: [] }, { Origin: 'http://evil.example:8233' });
    expect(res.status).toBe(403);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
  });

  test('malformed bodies get a JSON 400', async () => {
    for (const body of ['{not json', { nope: 1 }, { payloads: [1] }, { payloads: [{ data: 'a*b' }] }, { payloads: [{ metadata: { k: 5 } }] }]) {
      const res = await post('decode', body);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(/please check your input/);
    }
    const wrongType = await fetch(`${server.endpoint}/decode`, { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: '{}' });
    expect(wrongType.status).toBe(415);
  });

  test('a payload under an unknown key id is a JSON 422 naming the id', async () => {
    const stored = await codecWith([['retired', randomKey()]]).encode([toPayload('x')]);
    const res = await post('decode', { payloads: stored.map(json) });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { message: string }).message).toMatch(/unknown key id "retired"/);
  });

  test('authorize guards the POSTs but not the preflight', async () => {
    const guarded = await startCodecServer(codec, (_req, res) => {
      res.status(403).json({ success: false, message: 'client is not in ALLOW_IPS' });
    });
    try {
      const res = await fetch(`${guarded.endpoint}/decode`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"payloads":[]}' });
      expect(res.status).toBe(403);
      const pre = await fetch(`${guarded.endpoint}/decode`, { method: 'OPTIONS', headers: { Origin: 'http://localhost:8233' } });
      expect(pre.status).toBe(204);
    } finally {
      await guarded.close();
    }
  });
});
