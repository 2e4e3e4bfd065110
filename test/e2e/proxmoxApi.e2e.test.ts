import fs from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { execa } from 'execa';
import { startService, type RunningService } from '../../app/service';
import { ApiNode } from '../../lib/proxmox/api/node';
import { PveApi } from '../../lib/proxmox/api/http';
import { sshWorks, userKeyPair } from '../support/guest';
import { startHarness, type Harness } from '../support/harness';
import { requestSse } from '../support/sse';

/**
 * API mode end to end: the service reaches the sandbox cluster only through its REST API
 * (HTTPS, certificate pinned, a token), no node over SSH; guests are still reached over
 * real SSH.
 */

let h: Harness;
let root: ApiNode;

/** The privileges of docs/proxmox-api.md's role for Proxmox VE 9, but `missing`. */
const RECIPE_9 = [
  'VM.Allocate', 'VM.Audit', 'VM.Clone', 'VM.Config.CDROM', 'VM.Config.CPU', 'VM.Config.Cloudinit', 'VM.Config.Disk', 'VM.Config.HWType', 'VM.Config.Memory',
  'VM.Config.Network', 'VM.Config.Options', 'VM.GuestAgent.Audit', 'VM.GuestAgent.FileRead', 'VM.Migrate', 'VM.PowerMgmt', 'Datastore.AllocateSpace',
  'Datastore.AllocateTemplate', 'Datastore.Audit', 'Pool.Audit', 'Sys.Audit', 'Sys.AccessNetwork', 'SDN.Use',
];
const recipeWithout = (...missing: string[]) => RECIPE_9.filter((p) => !missing.includes(p));

beforeAll(async () => {
  h = await startHarness({}, { proxmoxApi: true });
  const s = h.config.proxmoxApi!;
  root = new ApiNode(new PveApi({ urls: s.urls, token: s.token, fingerprint: s.fingerprint }), h.config.mainNode);
});

afterAll(async () => {
  root?.api.close();
  await h?.stop();
});

async function tasks(type: string): Promise<Array<{ upid: string; type: string; id: string; status?: string }>> {
  const all = await Promise.all(
    h.config.sandboxOptions.nodes.map((n) => root.api.get<Array<{ upid: string; type: string; id: string; status?: string }>>(`/nodes/${n}/tasks`, { typefilter: type, limit: 500 })),
  );
  return all.flat().filter((t) => t.type === type);
}

test('an install on pve2: the node downloads the image (once per release), import-from makes the disk, the VM answers SSH', async () => {
  const key = userKeyPair('user@laptop');
  const imagePath = h.images.image('debian', '12').path;
  const res = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', name: 'api', node: 'pve2', pubkey: key.publicKey } });
  expect(res.status).toBe(200);
  expect(res.events.filter((e) => e.status === 'error')).toEqual([]);
  const vmid = Number(/^\[\*\] VMID: (\d+)$/m.exec(res.events.at(-3)!.message)?.[1]);
  expect(vmid).toBeGreaterThanOrEqual(100);
  expect(await sshWorks(`127.0.0.${vmid}`, h.config.vmSshPort, 'debian', key.privateKey)).toBe(true);

  // The node fetched the image itself, verified against the published checksum; the
  // service kept no copy.
  expect(res.events.some((e) => /pve1 downloaded local:import\/debian-12-generic-amd64-[0-9a-f]{12}\.qcow2 and verified it \(sha512\)/.test(e.message))).toBe(true);
  expect(h.images.gets(imagePath)).toBe(1);
  expect(fs.existsSync(path.join(h.config.dataDir, 'images'))).toBe(false);
  const conf = await h.sandbox.readConfig(vmid);
  expect(conf).toMatch(/^scsi0: local:\d+\/vm-\d+-disk-\d+\.qcow2,.*size=16G|^scsi0: .*size=16G/m);
  // It went to pve2 by a migration task the install followed.
  const migrations = (await tasks('qmigrate')).filter((t) => t.id === String(vmid));
  expect(migrations).toHaveLength(1);
  expect(res.events.some((e) => /migration finished successfully/.test(e.message))).toBe(true);

  // The same release again: found on the storage, not downloaded a second time.
  const again = await requestSse(`${h.api}/vm/install`, { body: { os: 'debian', version: '12', name: 'again', pubkey: key.publicKey } });
  expect(again.events.filter((e) => e.status === 'error')).toEqual([]);
  expect(again.events.some((e) => /local:import\/debian-12-generic-amd64-[0-9a-f]{12}\.qcow2 is on pve1 already/.test(e.message))).toBe(true);
  expect(h.images.gets(imagePath)).toBe(1);
  expect(await tasks('download')).toHaveLength(1);
});

describe('a token without VM.Allocate', () => {
  let limited: RunningService;

  beforeAll(async () => {
    // Every privilege docs/proxmox-api.md lists, but VM.Allocate (and VM.Clone).
    const token = h.sandbox.createApiToken({
      tokenid: 'qemurun@pve!nocreate',
      acl: [
        {
          path: '/',
          privs: recipeWithout('VM.Allocate', 'VM.Clone'),
        },
      ],
    });
    limited = await startService({
      config: {
        ...h.config,
        port: 0,
        proxmoxApi: { ...h.config.proxmoxApi!, token: `${token.tokenid}=${token.secret}` },
        temporal: { ...h.config.temporal, taskQueue: `${h.config.temporal.taskQueue}-nocreate` },
      },
      temporalAddress: process.env.TEST_TEMPORAL_ADDRESS!,
      workflowBundlePath: process.env.TEST_WORKFLOW_BUNDLE,
      host: '127.0.0.1',
    });
  });

  afterAll(async () => {
    await limited?.stop();
  });

  test('gets a 403 naming VM.Allocate, at the first try, and nothing is created', async () => {
    const res = await requestSse(`${limited.url}/api/vm/install`, { body: { os: 'debian', version: '12', id: 150 } });
    const error = res.events.find((e) => e.status === 'error');
    expect(error?.message).toMatch(/HTTP 403.*Permission check failed.*VM\.Allocate on \/vms\/150/);
    expect(await h.sandbox.readConfig(150)).toBeUndefined();
    expect((await tasks('qmcreate')).filter((t) => t.id === '150')).toEqual([]);
    // Not retried: a missing privilege does not come back by itself.
    const history = await limited.client.workflow.getHandle(res.headers['x-workflow-id'] as string).fetchHistory();
    const attempts = (history.events ?? [])
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createVm')
      .map((e) => e.eventId);
    expect(attempts).toHaveLength(1);
    const failed = (history.events ?? []).filter((e) => e.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type === 'PermissionDeniedError');
    expect(failed).toHaveLength(1);
    expect(failed[0].activityTaskFailedEventAttributes!.retryState).toBe(temporal.api.enums.v1.RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE);
  });
});

describe('failures no retry heals fail at once, saying what to change', () => {
  let other: RunningService | undefined;
  afterEach(async () => {
    await other?.stop();
    other = undefined;
  });

  async function serviceWith(name: string, api: Partial<NonNullable<typeof h.config.proxmoxApi>>): Promise<RunningService> {
    other = await startService({
      config: {
        ...h.config,
        port: 0,
        proxmoxApi: { ...h.config.proxmoxApi!, ...api },
        temporal: { ...h.config.temporal, taskQueue: `${h.config.temporal.taskQueue}-${name}` },
      },
      temporalAddress: process.env.TEST_TEMPORAL_ADDRESS!,
      workflowBundlePath: process.env.TEST_WORKFLOW_BUNDLE,
      host: '127.0.0.1',
    });
    return other;
  }

  /** Every failed activity attempt of the workflow: its failure type and retry state. */
  async function failedAttempts(service: RunningService, workflowId: string) {
    const history = await service.client.workflow.getHandle(workflowId).fetchHistory();
    return (history.events ?? [])
      .map((e) => e.activityTaskFailedEventAttributes)
      .filter((a) => a?.failure?.applicationFailureInfo)
      .map((a) => [a!.failure!.applicationFailureInfo!.type, a!.retryState]);
  }

  test("an image storage without content 'import': StorageError at the first try, naming the content to add", async () => {
    const service = await serviceWith('noimport', { imageStorage: 'nfs-backup' });
    const res = await requestSse(`${service.url}/api/vm/install`, { body: { os: 'debian', version: '12', id: 151 } });
    const error = res.events.find((e) => e.status === 'error');
    expect(error?.message).toMatch(/storage 'nfs-backup' is not configured for content-type 'import'.*to fix: allow content 'import' on storage 'nfs-backup'/);
    // One attempt, not retried.
    expect(await failedAttempts(service, res.headers['x-workflow-id'] as string)).toEqual([
      ['StorageError', temporal.api.enums.v1.RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE],
    ]);
    expect(await h.sandbox.readConfig(151)).toBeUndefined();
  });

  test("a role made for 8.4 on a 9 cluster (VM.Monitor gone, no VM.GuestAgent.*): a DHCP install fails at once, naming 9's privilege", async () => {
    // What an upgrade leaves of the 8.4 recipe's role: its privileges but VM.Monitor, which 9
    // ignores. The token's own ACL narrows it below its user's (the 9 recipe's role).
    const upgraded = h.sandbox.createApiToken({
      tokenid: 'qemurun@pve!upgraded',
      acl: [
        {
          path: '/',
          privs: recipeWithout('VM.GuestAgent.Audit', 'VM.GuestAgent.FileRead'),
        },
      ],
    });
    const service = await serviceWith('upgraded', { token: `${upgraded.tokenid}=${upgraded.secret}` });
    const res = await requestSse(`${service.url}/api/vm/install`, { body: { os: 'debian', version: '12', id: 153, ip: 'dhcp' } });
    const error = res.events.find((e) => e.status === 'error');
    expect(error?.message).toMatch(
      /Permission check failed \(\/vms\/153, VM\.GuestAgent\.Audit\|VM\.GuestAgent\.Unrestricted\).*to fix: give the token's role VM\.GuestAgent\.Audit and VM\.GuestAgent\.FileRead.*pveum role modify <role> --privs VM\.GuestAgent\.Audit,VM\.GuestAgent\.FileRead --append 1/,
    );
    const workflowId = res.headers['x-workflow-id'] as string;
    expect((await failedAttempts(service, workflowId)).filter(([type]) => type === 'GuestAddressError')).toEqual([
      ['GuestAddressError', temporal.api.enums.v1.RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE],
    ]);
    // At the first answer, not after SSH_WAIT_TIMEOUT (60 s here) of asking again.
    const history = await service.client.workflow.getHandle(workflowId).fetchHistory();
    const events = history.events ?? [];
    const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'readGuestAddress')!;
    const failed = events.find((e) => e.activityTaskFailedEventAttributes?.scheduledEventId?.toString() === scheduled.eventId?.toString())!;
    const seconds = (e: typeof failed) => Number(e.eventTime!.seconds);
    expect(seconds(failed) - seconds(scheduled)).toBeLessThan(30);
    // The install removed its VM, as every failed install does.
    expect(await h.sandbox.readConfig(153)).toBeUndefined();
  });

  test('a bridge the token may not use is a 400 naming SDN.Use on it, not a bridge the node lacks', async () => {
    // Proxmox lists a bridge only to a token with SDN.Audit or SDN.Use on it (pve-manager
    // PVE/API2/Network.pm `index`): this one may use vmbr0 alone, and the node has vmbr1 too.
    const file = path.join(h.sandbox.dir, 'sandbox', 'cluster.json');
    const saved = fs.readFileSync(file, 'utf8');
    const model = JSON.parse(saved) as { nodes: Array<{ name: string; bridges?: string[] }> };
    model.nodes.find((n) => n.name === h.config.mainNode)!.bridges = ['vmbr0', 'vmbr1'];
    fs.writeFileSync(file, JSON.stringify(model));
    try {
      const narrow = h.sandbox.createApiToken({
        tokenid: 'qemurun@pve!onebridge',
        acl: [
          {
            path: '/',
            privs: recipeWithout('SDN.Use'),
          },
          { path: '/sdn/zones/localnetwork/vmbr0', privs: ['SDN.Use'] },
        ],
      });
      const service = await serviceWith('onebridge', { token: `${narrow.tokenid}=${narrow.secret}` });
      const res = await requestSse(`${service.url}/api/vm/install`, { body: { os: 'debian', version: '12', id: 154, bridge: 'vmbr1' } });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.body).message).toBe(
        `please check your input: bridge: node '${h.config.mainNode}' lists no bridge 'vmbr1' to the Proxmox token (it lists vmbr0): the node lacks it, or the token lacks SDN.Use on /sdn/zones/localnetwork/vmbr1, without which Proxmox neither lists the bridge nor attaches a VM to it`,
      );
      expect(await h.sandbox.readConfig(154)).toBeUndefined();
    } finally {
      fs.writeFileSync(file, saved);
    }
  });

  test('a token revoked while the service runs: 401 Authentication failed!, not retried, naming PROXMOX_API_TOKEN', async () => {
    h.sandbox.createApiToken({ tokenid: 'qemurun@pve!revoked', acl: [{ path: '/', privs: ['QemuRun'] }] });
    const t = JSON.parse(fs.readFileSync(path.join(h.sandbox.dir, 'sandbox', 'api', 'tokens.json'), 'utf8')) as Array<{ tokenid: string; secret: string }>;
    const secret = t.find((x) => x.tokenid === 'qemurun@pve!revoked')!.secret;
    const service = await serviceWith('revoked', { token: `qemurun@pve!revoked=${secret}` });
    await execa('pveum', ['user', 'token', 'remove', 'qemurun@pve', 'revoked'], { env: h.sandbox.envFor(h.sandbox.mainNode) });
    const res = await requestSse(`${service.url}/api/vm/install`, { body: { os: 'debian', version: '12', id: 152 } });
    const error = res.events.find((e) => e.status === 'error');
    expect(error?.message).toMatch(/HTTP 401.*Authentication failed!.*to fix: .*PROXMOX_API_TOKEN/);
    // The preparation's steps run side by side: each that met the revoked token failed at
    // its first attempt (a retried one would end in another retry state), the rest were cancelled.
    const attempts = await failedAttempts(service, res.headers['x-workflow-id'] as string);
    expect(attempts.length).toBeGreaterThan(0);
    expect(new Set(attempts.map((a) => JSON.stringify(a)))).toEqual(
      new Set([JSON.stringify(['PermissionDeniedError', temporal.api.enums.v1.RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE])]),
    );
    expect(await h.sandbox.readConfig(152)).toBeUndefined();
  });
});
