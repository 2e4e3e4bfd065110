import { execa } from 'execa';
import { LocalExecutor } from '../../lib/executor';
import { CliNode } from '../../lib/proxmox';
import { parseVersion } from '../../lib/proxmox/pvesh';
import { supportedRelease } from '../../lib/proxmox/version';
import { checkNodeVersions, describeNodeVersions } from '../../lib/nodeVersions';
import { StartupError } from '../../lib/startupError';
import { startTestCluster, type TestCluster } from '../../sandbox/testkit';
import { ApiNode } from '../../lib/proxmox/api/node';
import { PveApi } from '../../lib/proxmox/api/http';
import { testSpawner } from '../support/spawner';

/**
 * The service reads `pvesh get /version` of every node at start and refuses a node older
 * than Proxmox VE 8.0; the sandbox answers that call per node, as real nodes do.
 */

// Captured from real nodes: 8.x prints a 16-digit repoid, 7.x an 8-digit one and a dashed version.
const PVE_8 = '{"release":"8.3","repoid":"3e76eec21c4a14a7","version":"8.3.2"}';
const PVE_7 = '{"release":"7.4","repoid":"9002ab8a","version":"7.4-3"}';

test('parseVersion reads both release lines', () => {
  expect(parseVersion(PVE_8)).toEqual({ release: '8.3', repoid: '3e76eec21c4a14a7', version: '8.3.2' });
  expect(parseVersion(PVE_7)).toEqual({ release: '7.4', repoid: '9002ab8a', version: '7.4-3' });
  expect(() => parseVersion('{"repoid":"x"}')).toThrow('/version');
});

test('8.0 and later are supported, 7.x is not', () => {
  expect(supportedRelease({ release: '8.0' })).toBe(true);
  expect(supportedRelease({ release: '9.1' })).toBe(true);
  expect(supportedRelease({ release: '7.4' })).toBe(false);
  expect(supportedRelease({ release: 'garbage' })).toBe(false);
});

test("the start-up names each node's release, nodes on the same one together", () => {
  const v = (version: string) => ({ release: version.replace(/^(\d+\.\d+).*$/, '$1'), version });
  expect(describeNodeVersions({ pve3: v('9.1.1'), pve2: v('8.4.1'), pve1: v('9.1.1') })).toBe('Proxmox VE 9.1.1 on pve1, pve3; 8.4.1 on pve2');
  expect(describeNodeVersions({ pve1: v('9.1.1') })).toBe('Proxmox VE 9.1.1 on pve1');
  expect(describeNodeVersions({})).toBe('Proxmox VE: no node answered');
});

describe('against a sandbox cluster with a node left on 7.4', () => {
  let t: TestCluster;
  let api: PveApi;
  beforeAll(async () => {
    t = await startTestCluster({ nodes: ['pve1', 'pve2', 'pve3'], pveVersions: { pve2: '7.4-3' }, api: { authFailureDelayMs: 0 } });
    const a = t.cluster.api!;
    api = new PveApi({ urls: [a.url], token: `${a.token.tokenid}=${a.token.secret}`, fingerprint: a.fingerprint });
  });
  afterAll(async () => {
    api?.close();
    await t?.dispose();
  });

  const pvesh = (node: string, path: string) => execa('pvesh', ['get', path, '--output-format', 'json'], { env: t.cluster.envFor(node) });

  test("each node's /version is its own, in real Proxmox's shape", async () => {
    const own = JSON.parse((await pvesh('pve1', '/version')).stdout) as Record<string, string>;
    expect(Object.keys(own)).toEqual(['release', 'repoid', 'version']);
    expect(own).toMatchObject({ release: '9.1', version: '9.1.1' });
    expect(own.repoid).toMatch(/^[0-9a-f]{16}$/);
    const old = JSON.parse((await pvesh('pve2', '/version')).stdout) as Record<string, string>;
    expect(old).toMatchObject({ release: '7.4', version: '7.4-3' });
    expect(old.repoid).toMatch(/^[0-9a-f]{8}$/);
    // /nodes/<n>/status agrees, whichever node is asked.
    const status = JSON.parse((await pvesh('pve1', '/nodes/pve2/status')).stdout) as { pveversion: string };
    expect(status.pveversion).toBe(`pve-manager/7.4-3/${old.repoid}`);
  });

  test("a 7.4 node's qm does not know --ciupgrade, as qemu-server before 8.0.2 did not", async () => {
    const qm = (node: string, args: string[]) => execa('qm', args, { env: t.cluster.envFor(node), reject: false });
    expect((await qm('pve2', ['create', '150', '--ciupgrade', '0'])).stderr).toMatch(/^Unknown option: ciupgrade\n400 unable to parse option/);
    expect((await qm('pve1', ['create', '151', '--ciupgrade', '0'])).exitCode).toBe(0);
  });

  test('the start-up check names the old node, its version and the minimum', async () => {
    const node = (n: string, env = t.cluster.envFor(n)) => new CliNode(new LocalExecutor(n, { spawner: testSpawner(), env }));
    const err = await checkNodeVersions(['pve1', 'pve2', 'pve3'].map((n) => node(n))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StartupError);
    expect((err as StartupError).exitCode).toBe(78);
    expect((err as Error).message).toBe(
      "pve2 runs Proxmox VE 7.4 (pve-manager 7.4-3); QemuRun needs Proxmox VE 8.0 or later (installs use qm's --ciupgrade and the x86-64-v2-AES/-v3 CPU models): upgrade that node",
    );

    // Without the old node the check passes; a node that does not answer is reported, not fatal.
    const report = await checkNodeVersions([node('pve1'), node('pve3'), node('gone', { PATH: '/nonexistent' })]);
    expect(Object.keys(report.versions).sort()).toEqual(['pve1', 'pve3']);
    expect(Object.keys(report.unreachable)).toEqual(['gone']);
  });

  test("in API mode each node's version is read at /nodes/{node}/version, so the old node is named too", async () => {
    // /version is the serving node's (the sandbox's server plays the main node, pve1).
    expect(await new ApiNode(api, 'pve2').version()).toMatchObject({ release: '7.4', version: '7.4-3' });
    expect(await new ApiNode(api, 'pve3').version()).toMatchObject({ release: '9.1', version: '9.1.1' });
    const err = await checkNodeVersions(['pve1', 'pve2', 'pve3'].map((n) => new ApiNode(api, n))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StartupError);
    expect((err as Error).message).toMatch(/^pve2 runs Proxmox VE 7\.4 \(pve-manager 7\.4-3\); QemuRun needs Proxmox VE 8\.0 or later/);
  });
});
