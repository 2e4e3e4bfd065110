import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { parse } from 'yaml';
import { REPO_ROOT } from '../../lib/repoRoot';
import { TEMPORAL_CONFIG_DIR, TEMPORAL_CONFIG_ENV, TEMPORAL_SERVER_BIN } from '../support/realTemporal';

/**
 * docker-compose.yml has no Docker engine to run on here: it is checked by Compose's own
 * validator (Debian's docker-compose, which needs no daemon for `config`), and held to
 * what the tests do run: the same Temporal server version and configuration.
 */

type Service = {
  image?: string;
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  entrypoint?: string[];
  command?: string[];
  container_name?: string;
  stop_grace_period?: string;
};
const composeFile = path.join(REPO_ROOT, 'docker-compose.yml');
const compose = parse(fs.readFileSync(composeFile, 'utf8'), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;

/** A `${VAR...}` reference with a value filled in, as Compose substitutes it from .env. */
const substituted = (v: string) => v.replace(/\$\{[A-Z_]+[:?-][^}]*\}/g, 'from-env');

/** The host folder a service mounts at `target`. */
function mountedAt(service: Service, target: string): string | undefined {
  const spec = service.volumes?.find((v) => v.split(':')[1] === target);
  return spec && path.resolve(REPO_ROOT, spec.split(':')[0]);
}

/** `docker-compose config -q` on a copy of the file, with `.env` made from the example plus `extraEnv`. */
async function composeConfig(extraEnv: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qemurun-compose-'));
  try {
    fs.copyFileSync(composeFile, path.join(dir, 'docker-compose.yml'));
    fs.writeFileSync(path.join(dir, '.env'), fs.readFileSync(path.join(REPO_ROOT, '.env.example'), 'utf8') + extraEnv);
    const res = await execa('docker-compose', ['-f', 'docker-compose.yml', 'config', '-q'], { cwd: dir, reject: false });
    return { exitCode: res.exitCode, stderr: res.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('Compose itself validates the file (docker-compose config), with .env.example filled in', async () => {
  expect(await composeConfig('TEMPORAL_DB_PASSWORD=3f9c1e0b7a\n')).toEqual({ exitCode: 0, stderr: '' });
});

test('without a database password Compose refuses to start anything, naming the setting', async () => {
  const res = await composeConfig('');
  expect(res.exitCode).not.toBe(0);
  expect(res.stderr).toMatch(/set TEMPORAL_DB_PASSWORD in \.env/);
});

test('the server image, the admin tools and the build script name one Temporal server version', () => {
  const script = fs.readFileSync(path.join(REPO_ROOT, 'scripts', 'install-temporal-server.sh'), 'utf8');
  const built = /^version="\$\{TEMPORAL_SERVER_VERSION:-v(\d+\.\d+\.\d+)\}"$/m.exec(script)?.[1];
  expect(built).toMatch(/^\d+\.\d+\.\d+$/);
  expect(services.temporal.image).toBe(`temporalio/server:${built}`);
  // The admin tools carry the schema files, which belong to one server release.
  for (const name of ['temporal-admin-tools', 'temporal-create-namespace']) {
    expect(services[name].image).toMatch(new RegExp(`^temporalio/admin-tools:${built!.replace(/\./g, '\\.')}(-|$)`));
  }
});

test('the server runs the configuration the test suite runs, and the schema set-up the tests run', () => {
  const temporal = services.temporal;
  const command = temporal.command!.join(' ');
  const root = /--root (\S+)/.exec(command)?.[1];
  const config = /--config (\S+)/.exec(command)?.[1];
  expect(/--env (\S+)/.exec(command)?.[1]).toBe(TEMPORAL_CONFIG_ENV);
  const configTarget = path.posix.join(root!, config!);
  expect(mountedAt(temporal, configTarget)).toBe(TEMPORAL_CONFIG_DIR);
  expect(fs.existsSync(path.join(TEMPORAL_CONFIG_DIR, `${TEMPORAL_CONFIG_ENV}.yaml`))).toBe(true);

  const dynamic = temporal.environment!.DYNAMIC_CONFIG_FILE_PATH;
  expect(path.posix.dirname(dynamic)).toBe(configTarget);
  expect(fs.existsSync(path.join(TEMPORAL_CONFIG_DIR, path.posix.basename(dynamic)))).toBe(true);

  const admin = services['temporal-admin-tools'];
  const setup = admin.entrypoint!.at(-1)!;
  const adminTarget = path.posix.dirname(setup);
  expect(mountedAt(admin, adminTarget)).toBe(TEMPORAL_CONFIG_DIR);
  expect(fs.existsSync(path.join(TEMPORAL_CONFIG_DIR, path.posix.basename(setup)))).toBe(true);
});

test('the server accepts the configuration with the compose settings: PostgreSQL, every interface, mTLS', async () => {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(services.temporal.environment!)) env[k] = substituted(String(v));
  const res = await execa(TEMPORAL_SERVER_BIN, ['--config', path.relative(REPO_ROOT, TEMPORAL_CONFIG_DIR), '--env', TEMPORAL_CONFIG_ENV, 'render-config'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH, ...env },
    extendEnv: false,
  });
  expect(res.stdout).toMatch(/connectAddr: postgresql:5432/);
  expect(res.stdout).toMatch(/pluginName: postgres12/);
  expect(res.stdout).toMatch(/bindOnIP: 0\.0\.0\.0/);
  expect(res.stdout).toMatch(/requireClientAuth: true/);
  expect(res.stdout).toContain(`filepath: ${env.DYNAMIC_CONFIG_FILE_PATH}`);

  const dynamic = await execa(TEMPORAL_SERVER_BIN, ['validate-dynamic-config', path.join(TEMPORAL_CONFIG_DIR, 'dynamicconfig.yaml')]);
  expect(dynamic.stdout.split('\n').filter((l) => /error|warning/.test(l))).toEqual([]);
});

test('one API and N workers: the roles, one set of keys, nothing that stops a worker from scaling', () => {
  const { api, worker } = services;
  expect(api.environment!.QEMURUN_ROLE).toBe('api');
  expect(worker.environment!.QEMURUN_ROLE).toBe('worker');
  expect(api.ports).toEqual(['8080:8080']);
  // `--scale worker=3` fails on a published host port or a fixed container name.
  expect(worker.ports).toBeUndefined();
  expect(worker.container_name).toBeUndefined();
  for (const k of ['TEMPORAL_ADDRESS', 'ENCRYPTION_KEY_FILE', 'SSH_KEY_PATH', 'TEMPORAL_TLS_CERT', 'TEMPORAL_TLS_CA']) {
    expect([k, worker.environment![k]]).toEqual([k, api.environment![k]]);
  }
  // A stopping worker gets its shutdown grace (20 s by default) before Docker kills it.
  expect(Number(/^(\d+)s$/.exec(worker.stop_grace_period ?? '')?.[1])).toBeGreaterThan(20);
});

test("the API listens on its container's every interface: API_HOST's default, loopback, would be out of the published port's reach", () => {
  expect(services.api.environment!.API_HOST).toBe('0.0.0.0');
  // The image says so too, for a `docker run -p 8080:8080` without compose.
  const env = fs.readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8').match(/^ENV .*$/m)?.[0];
  expect(env).toMatch(/\bAPI_HOST=0\.0\.0\.0\b/);
  // The worker's health port stays on loopback: its HEALTHCHECK runs inside the container.
  expect(services.worker.environment!.WORKER_HEALTH_HOST).toBeUndefined();
});

test('the Temporal UI is published on loopback only and offers no write actions', async () => {
  const ui = services['temporal-ui'];
  // The UI holds a client certificate: published on every interface with its terminate and
  // reset buttons, it would be Temporal access for anyone who reaches the host.
  expect(ui.ports).toEqual(['127.0.0.1:8088:8080']);
  expect(ui.environment!.TEMPORAL_UI_DISABLE_WRITE_ACTIONS).toBe('true');
  expect((await composeConfig('TEMPORAL_DB_PASSWORD=x\n')).exitCode).toBe(0);
});
