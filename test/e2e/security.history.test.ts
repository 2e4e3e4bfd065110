import crypto from 'node:crypto';
import util from 'node:util';
import { execa } from 'execa';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { findTemporalCli } from '../../lib/temporal/devServer';
import { startHarness, Harness } from '../support/harness';
import { requestSse, SseResponse } from '../support/sse';
import { expectRootPasswordSetAsHash } from '../support/rootPassword';

/**
 * Secrets of an install (the cloud-init `passwd` of the request, its `userData` and VM_ROOT_PASSWORD)
 * leave no trace anywhere an operator or another process can read: Temporal's history as
 * the real CLI prints it (payload data is base64 there, so every base64 string is decoded
 * and searched too), the workflow's memo and search attributes, the SSE stream, the
 * service's log output, the argv of every qm/pvesh/pvesm call, and the argv lines of the
 * guest's privileged tools. The root password's one legitimate destination, chpasswd's
 * stdin inside the guest, is checked to have received it.
 */

const secret = (tag: string) => `${tag}-${crypto.randomBytes(12).toString('hex')}`;
const PASSWD = secret('qrpw');
const ROOT_PASSWORD = secret('qrroot');
const SCHEDULE_PASSWD = secret('qrsched');
/** Inside the request's cloud-init user-data, which may carry secrets too. */
const USER_DATA_SECRET = secret('qrud');
const SECRETS = [PASSWD, ROOT_PASSWORD, SCHEDULE_PASSWD, USER_DATA_SECRET];

let h: Harness;
let install: SseResponse;
let workflowId: string;
let vmid: number;
const logLines: string[] = [];

beforeAll(async () => {
  // Everything this process prints from start-up to the end of the install: the API, the
  // worker (its activities and, through sinks, the workflow's logger) and the Temporal
  // SDK's logger, which records at DEBUG level here (the service logs INFO and up).
  try {
    Runtime.install({
      logger: new DefaultLogger('DEBUG', (entry) => {
        logLines.push(`${entry.level} ${entry.message} ${util.inspect(entry.meta, { depth: 10 })}`);
      }),
    });
  } catch {
    // A Runtime exists already in this process: its logger writes to stderr, captured below.
  }
  const restore: Array<() => void> = [];
  for (const stream of [process.stdout, process.stderr]) {
    const original = stream.write.bind(stream);
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      logLines.push(Buffer.isBuffer(chunk) ? chunk.toString('utf8') : String(chunk));
      return (original as (...a: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof stream.write;
    restore.push(() => (stream.write = original as typeof stream.write));
  }
  for (const method of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) {
    const original = console[method];
    console[method] = (...args: unknown[]) => {
      logLines.push(util.format(...args));
      original.apply(console, args);
    };
    restore.push(() => (console[method] = original));
  }
  try {
    // `local` takes snippets, for the request's userData (SNIPPETS_STORAGE).
    h = await startHarness({ VM_ROOT_PASSWORD: ROOT_PASSWORD }, { storageContent: { local: ['backup', 'import', 'iso', 'snippets', 'vztmpl'] } });
    const userData = `#cloud-config\nwrite_files:\n  - path: /etc/qr-token\n    content: ${USER_DATA_SECRET}\n`;
    install = await requestSse(`${h.api}/vm/install`, {
      body: { os: 'debian', version: '12', name: 'secret', passwd: PASSWD, userData },
    });
    // Results and failures are written by the worker just after the last event.
    await h.service.client.workflow.getHandle(install.headers['x-workflow-id'] as string).result();
  } finally {
    for (const r of restore) r();
  }
  workflowId = install.headers['x-workflow-id'] as string;
  vmid = Number(/\[\*\] VMID: (\d+)/.exec(install.body)?.[1]);
}, 180_000);

afterAll(async () => {
  await h?.stop();
});

const BASE64_RUN = /[A-Za-z0-9+/_-]{8,}={0,2}/g;

/** Where `needle` occurs in `text`, also inside base64 (and base64 inside that), as `path`s. */
function findSecret(text: string, needle: string, depth = 0, where = 'text'): string[] {
  const hits: string[] = [];
  if (text.includes(needle)) hits.push(where);
  if (depth >= 3) return hits;
  for (const m of text.matchAll(BASE64_RUN)) {
    for (const variant of new Set([m[0], m[0].replace(/-/g, '+').replace(/_/g, '/')])) {
      const bytes = Buffer.from(variant, 'base64');
      if (bytes.length < needle.length) continue;
      for (const decoded of new Set([bytes.toString('utf8'), bytes.toString('latin1')])) {
        hits.push(...findSecret(decoded, needle, depth + 1, `${where} > base64@${m.index}`));
      }
    }
  }
  return hits;
}

function expectNoSecrets(label: string, text: string): void {
  for (const s of SECRETS) {
    expect({ label, secret: s, found: findSecret(text, s) }).toEqual({ label, secret: s, found: [] });
  }
}

function temporalCli(args: string[]) {
  const cli = findTemporalCli(process.env.TEMPORAL_CLI_PATH);
  if (!cli) throw new Error('the Temporal CLI is needed (npm run setup:temporal)');
  return execa(cli.path, [...args, '--address', process.env.TEST_TEMPORAL_ADDRESS!, '--namespace', h.config.temporal.namespace], {
    timeout: 60_000,
  });
}

test('the install succeeded with both secrets in use', () => {
  expect(install.status).toBe(200);
  expect(install.closed).toBe(true);
  expect(install.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(vmid).toBeGreaterThanOrEqual(100);
});

test('`temporal workflow show` and `describe` (the real CLI) print neither secret, not even in base64', async () => {
  const show = await temporalCli(['workflow', 'show', '--workflow-id', workflowId, '--output', 'json']);
  const describe = await temporalCli(['workflow', 'describe', '--workflow-id', workflowId, '--output', 'json']);
  // The history is really there: the signals and activities of a whole install.
  expect(show.stdout).toContain('EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED');
  expect(show.stdout).toContain(Buffer.from('binary/encrypted').toString('base64'));
  expectNoSecrets('workflow show', show.stdout);
  expectNoSecrets('workflow describe', describe.stdout);
  expectNoSecrets('workflow show (stderr)', show.stderr);
});

test('decoded through the codec endpoint, the history reads in clear but its secrets are "<redacted>"', async () => {
  // The CLI, pointed at the service's /codec endpoint, shows the decrypted workflow input
  // (the spec is there to read), and in place of every secret the word "<redacted>".
  const decoded = await temporalCli(['workflow', 'show', '--workflow-id', workflowId, '--output', 'json', '--codec-endpoint', `${h.service.url}/codec`]);
  expect(decoded.stdout).not.toContain(Buffer.from('binary/encrypted').toString('base64'));
  // (The CLI prints payload data as base64; findSecret looks inside it.)
  expect(findSecret(decoded.stdout, '"secrets":"<redacted>"').length).toBeGreaterThan(0);
  expect(findSecret(decoded.stdout, '"os":"debian"').length).toBeGreaterThan(0);
  expectNoSecrets('workflow show through the codec endpoint', decoded.stdout);
});

test('memo, search attributes, static summary and the status endpoint hold no secret', async () => {
  const d = await h.service.client.workflow.getHandle(workflowId).describe();
  expect(d.memo).toBeDefined();
  expectNoSecrets('memo (decoded)', JSON.stringify(d.memo ?? {}));
  expectNoSecrets('search attributes', JSON.stringify(d.typedSearchAttributes));
  expectNoSecrets('raw describe', JSON.stringify(d.raw));
  const status = await fetch(`${h.api}/vm/install/${workflowId}`);
  expect(status.status).toBe(200);
  expectNoSecrets('GET /vm/install/:id', await status.text());
});

test('the SSE stream and a re-attached stream hold no secret', async () => {
  expectNoSecrets('install stream', install.body);
  const again = await requestSse(`${h.api}/vm/install/${workflowId}/events`);
  expect(again.closed).toBe(true);
  expectNoSecrets('re-attached stream', again.body);
});

test("the service's log output during the install holds no secret", () => {
  // Something was captured: the worker's log of this very install's activities.
  expect(logLines.filter((l) => l.includes(workflowId)).length).toBeGreaterThan(5);
  expectNoSecrets('log output', logLines.join('\n'));
});

test('no qm / pvesh / pvesm call carries a secret in its argv', async () => {
  const calls = await h.sandbox.calls();
  expect(calls.some((c) => c.argv[0] === 'qm' && c.argv[1] === 'set' && c.argv.includes('--cipassword'))).toBe(true);
  expectNoSecrets('sandbox call log', JSON.stringify(calls));
  // What Proxmox got is the password's SHA-256 crypt hash, and it verifies.
  const conf = (await h.sandbox.readConfig(vmid))!;
  const hash = /^cipassword: (\$5\$([^$]+)\$\S+)$/m.exec(conf);
  expect(hash).not.toBeNull();
  const { stdout } = await execa('openssl', ['passwd', '-5', '-salt', hash![2], '--', PASSWD]);
  expect(stdout).toBe(hash![1]);
  expectNoSecrets('VM config', conf);
});

test("the guest's privileged log: no secret in any argv; the root password only as its hash on chpasswd's stdin", async () => {
  const log = await h.sandbox.guestLog(vmid);
  const lines = log.split('\n').filter(Boolean);
  const argvLines = lines.filter((l) => !l.startsWith('  stdin: '));
  const stdinLines = lines.filter((l) => l.startsWith('  stdin: '));
  expect(argvLines.some((l) => / root: chpasswd -e$/.test(l))).toBe(true);
  expectNoSecrets('privileged argv lines', argvLines.join('\n'));
  expect(stdinLines.join('\n')).not.toContain(ROOT_PASSWORD);
  expectRootPasswordSetAsHash(log, ROOT_PASSWORD);
  // The request's passwd is cloud-init's business, not the init script's.
  expect(findSecret(log, PASSWD)).toEqual([]);
});

test('a schedule that carries a passwd: neither `temporal schedule describe` nor the API shows it', async () => {
  const id = `security-history-${crypto.randomBytes(4).toString('hex')}`;
  const created = await fetch(`${h.api}/schedules`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ id, vmid, interval: '1d', paused: true, passwd: SCHEDULE_PASSWD }),
  });
  expect(created.status).toBe(201);
  try {
    const describe = await temporalCli(['schedule', 'describe', '--schedule-id', id, '--output', 'json']);
    expect(describe.stdout).toContain(id);
    expectNoSecrets('schedule describe', describe.stdout);
    const list = await temporalCli(['schedule', 'list', '--output', 'json']);
    expectNoSecrets('schedule list', list.stdout);
    const shown = await fetch(`${h.api}/schedules/${id}`);
    expectNoSecrets('GET /schedules/:id', await shown.text());
    // Decoded through the codec endpoint, the action's input reads in clear, its passwd redacted.
    const decoded = await temporalCli(['schedule', 'describe', '--schedule-id', id, '--output', 'json', '--codec-endpoint', `${h.service.url}/codec`]);
    expect(findSecret(decoded.stdout, '"passwd":"<redacted>"').length).toBeGreaterThan(0);
    expect(findSecret(decoded.stdout, SCHEDULE_PASSWD)).toEqual([]);
  } finally {
    await fetch(`${h.api}/schedules/${id}`, { method: 'DELETE', headers: { 'Content-Type': 'application/json' } });
  }
});
