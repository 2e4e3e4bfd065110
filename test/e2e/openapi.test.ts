import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { createApp } from '../../api/app';
import { registeredRoutes } from '../../api/routeTable';
import { DOCUMENTED_ROUTES } from '../../api/openapi/document';
import { createMetrics } from '../../lib/observability/metrics';
import { cliCluster } from '../../lib/proxmox';
import { startHarness, type Harness } from '../support/harness';
import { requestSse } from '../support/sse';

/**
 * /api/openapi.json describes every route the app registers, and the answers of a real
 * run (an install streamed and started async, its status, the list, errors) validate
 * against it with a JSON Schema 2020-12 validator.
 */

let h: Harness;
let doc: any;
let ajv: Ajv2020;

beforeAll(async () => {
  h = await startHarness();
  const res = await fetch(`${h.api}/openapi.json`);
  expect(res.status).toBe(200);
  doc = await res.json();
  ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  // The document is the schema store: answers are checked against its own $refs.
  ajv.addSchema(doc, 'openapi.json');
}, 120_000);

afterAll(async () => {
  await h?.stop();
});

/** The schema the document gives for an answer, from the express pattern of its route. */
function answerSchema(method: string, route: string, status: number, type: string): object {
  const op = doc.paths[route.replace(/:(\w+)/g, '{$1}')]?.[method.toLowerCase()];
  if (!op) throw new Error(`${method} ${route} is not documented`);
  const media = op.responses[String(status)]?.content?.[type];
  if (!media) throw new Error(`${method} ${route} documents no ${status} ${type} answer`);
  return type === 'text/event-stream' ? media['x-event-data'] : media.schema;
}

function expectValid(method: string, route: string, status: number, type: string, body: unknown): void {
  const schema = answerSchema(method, route, status, type);
  const validate = ajv.compile({ $ref: `openapi.json#/paths/${pointer(route)}/${method.toLowerCase()}/responses/${status}/content/${pointer(type)}/${type === 'text/event-stream' ? 'x-event-data' : 'schema'}` });
  expect(schema).toBeDefined();
  if (!validate(body)) throw new Error(`${method} ${route} ${status}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body).slice(0, 500)}`);
}

const pointer = (s: string) => s.replace(/:(\w+)/g, '{$1}').replace(/~/g, '~0').replace(/\//g, '~1');

test('the document is OpenAPI 3.1 and every registered route is in it, and nothing else', () => {
  expect(doc.openapi).toMatch(/^3\.1\./);
  // The app as the service builds it, with every optional router mounted.
  const app = createApp({
    config: h.config,
    client: h.service.client,
    knownNodes: ['pve1', 'pve2'],
    proxmox: cliCluster({}, h.config.mainNode),
    codec: { encode: async (p) => p, decode: async (p) => p },
    metrics: createMetrics(),
  });
  const key = (r: { method: string; path: string }) => `${r.method} ${r.path}`;
  const registered = registeredRoutes(app).map(key).sort();
  expect(DOCUMENTED_ROUTES.map(key).sort()).toEqual(registered);
  for (const route of registeredRoutes(app)) expect(doc.paths[route.path.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()]).toBeDefined();
  // Headers that change behaviour are declared where they apply.
  const params = (m: string, p: string) => (doc.paths[p][m].parameters ?? []).map((x: { name: string }) => x.name);
  expect(params('post', '/api/vm/install')).toEqual(expect.arrayContaining(['Idempotency-Key', 'Prefer']));
  expect(params('get', '/api/vm/install/{workflowId}/events')).toContain('Last-Event-ID');
  expect(doc.paths['/api/vm/install'].post.responses['200'].content['text/event-stream']).toBeDefined();
  // Request bodies are the validating schemas: the install's fields and their limits.
  expect(doc.components.schemas.InstallBody).toMatchObject({
    type: 'object',
    required: ['os', 'version'],
    additionalProperties: false,
    properties: {
      os: { enum: ['debian', 'ubuntu', 'rockylinux'] },
      // Any VMID Proxmox allows: without address pools the API holds it to 254 (docs/api.md).
      id: { type: 'integer', minimum: 100, maximum: 999999999 },
      bridge: { type: 'string', pattern: '^[-_.A-Za-z0-9]{1,15}$' },
      vlan: { type: 'integer', minimum: 1, maximum: 4094 },
      mtu: { type: 'integer', minimum: 576, maximum: 65520 },
      dns: {
        type: 'object',
        additionalProperties: false,
        properties: { servers: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'string' } }, search: { type: 'string' } },
      },
    },
  });
  // Placement (issue 24): typed as the API checks them; `storage` is a storage id now, no longer any value.
  expect(doc.components.schemas.InstallBody.properties).toMatchObject({
    tags: { type: 'array', maxItems: 32, items: { type: 'string' } },
    description: { type: 'string' },
    pool: { type: 'string', pattern: expect.any(String) },
    storage: { type: 'string', pattern: expect.any(String) },
  });
  // Disks, machine, firmware (issue 24).
  expect(doc.components.schemas.InstallBody.properties).toMatchObject({
    disks: {
      type: 'array',
      maxItems: 8,
      items: { type: 'object', additionalProperties: false, required: ['size'], properties: { size: { type: 'string', pattern: expect.any(String) }, storage: { type: 'string' } } },
    },
    machine: { enum: ['q35', 'pc'] },
    bios: { enum: ['seabios', 'ovmf'] },
  });
});

test('the answers of a real install, its status, the list and errors validate against the document', async () => {
  const install = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', name: 'openapi' } });
  expect(install.status).toBe(200);
  expect(install.closed).toBe(true);
  for (const frame of install.frames.filter((f) => f.event !== 'close')) expectValid('POST', '/api/vm/install', 200, 'text/event-stream', JSON.parse(frame.data));
  const workflowId = String(install.headers['x-workflow-id']);

  const async = await fetch(`${h.api}/vm/install`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Prefer: 'respond-async' },
    body: JSON.stringify({ os: 'debian', version: '12', name: 'openapi-async' }),
  });
  expect(async.status).toBe(202);
  expectValid('POST', '/api/vm/install', 202, 'application/json', await async.json());

  const status = await fetch(`${h.api}/vm/install/${workflowId}`);
  expectValid('GET', '/api/vm/install/:workflowId', 200, 'application/json', await status.json());
  const generic = await fetch(`${h.api}/workflows/${workflowId}`);
  expectValid('GET', '/api/workflows/:workflowId', 200, 'application/json', await generic.json());

  const list = await fetch(`${h.api}/vm/list`);
  expectValid('GET', '/api/vm/list', 200, 'application/json', await list.json());
  const vmid = (install.events.map((e) => /\[\*\] VMID: (\d+)/.exec(e.message)?.[1]).find(Boolean));
  const state = await fetch(`${h.api}/vm/${vmid}/status`);
  expect(state.headers.get('content-type')).toMatch(/^text\/plain/);
  expectValid('GET', '/api/vm/:id/status', 200, 'text/plain', await state.text());

  const bad = await fetch(`${h.api}/vm/install`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ os: 'debian', version: '12', cpu: 'many' }) });
  expect(bad.status).toBe(400);
  expectValid('POST', '/api/vm/install', 400, 'application/json', await bad.json());
  const missing = await fetch(`${h.api}/workflows/install-does-not-exist`);
  expect(missing.status).toBe(404);
  expectValid('GET', '/api/workflows/:workflowId', 404, 'application/json', await missing.json());
  const badList = await fetch(`${h.api}/vm/list?disable=2`);
  expectValid('GET', '/api/vm/list', 400, 'application/json', await badList.json());
  const ready = await fetch(`${h.api}/health/ready`);
  expectValid('GET', '/api/health/ready', ready.status, 'application/json', await ready.json());

  // The validator is real: a wrong answer fails.
  expect(() => expectValid('GET', '/api/vm/list', 200, 'application/json', { count: 'two' })).toThrow(/must be/);
}, 240_000);
