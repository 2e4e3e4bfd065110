import crypto from 'node:crypto';
import { installedDescription, installSpecSchema, checkInput, proxmoxTags, specMarkerValue, specOf, type InstallSpec } from '../../contract';
import { installAnswer } from '../support/installAnswer';
import { qmCreate, qmSet } from '../../lib/proxmox/commands';
import { classifyFailure, PermissionDeniedError } from '../../lib/proxmox/errors';
import { MarkerSeal, sealedSpec } from '../../lib/vm/markerSeal';
import { loadConfig, type Config } from '../../lib/config';
import type { ProxmoxNode } from '../../lib/proxmox/node';
import type { StorageStatus } from '../../lib/proxmox/parse';
import { poolProblem, storageProblem } from '../../lib/vm/placement';

/**
 * Placement (issue 24, item 3): tags, description, pool and storage on the one schema, in
 * the VM's markers and in what is sent to Proxmox; a seed-shaped body means what it meant.
 */

const base = { os: 'debian', version: '12' } as const;

const apiAnswer = (body: unknown) => installAnswer(body, { nodes: ['pve1'] });

describe("the API's 400s name the field", () => {
  test.each<[string, Record<string, unknown>, RegExp]>([
    ['tags not an array', { tags: 'web' }, /^tags: must be an array of strings$/],
    ['a tag with a space', { tags: ['web server'] }, /^tags: must be Proxmox tags: tag 1 is not a Proxmox tag/],
    ['a tag starting with -', { tags: ['ok', '-web'] }, /^tags: must be Proxmox tags: tag 2 is not/],
    ['a tag with ;', { tags: ['a;b'] }, /^tags: must be Proxmox tags: tag 1/], ['a tag not a string', { tags: [1] }, /^tags\[0\]: must be a string$/],
    ['too many tags', { tags: Array.from({ length: 33 }, (_, i) => `t${i}`) }, /^tags: must be at most 32 tags$/],
    ['description not a string', { description: 5 }, /^description: must be a string$/],
    ['description over 8192 bytes', { description: 'é'.repeat(4097) }, /^description: must be at most 8192 bytes$/],
    ['description that fits alone but not beside the markers', { description: 'x'.repeat(4000) }, /^description: is \d+ bytes too long: Proxmox keeps at most 8192 characters/],
    ['description with a NUL', { description: 'notes\u0000more' }, /^description: must not contain a NUL character/],
    ['pool with a space', { pool: 'my pool' }, /^pool: must be a Proxmox pool name/],
    ['pool nested too deep', { pool: 'a/b/c/d' }, /^pool: must be a Proxmox pool name/],
    ['storage with a colon', { storage: 'local:lvm' }, /^storage: must be a Proxmox storage id/],
    ['storage not a string', { storage: 1 }, /^storage: must be a string$/],
  ])('%s', (_name, fields, problem) => {
    expect(apiAnswer({ ...base, ...fields })).toMatch(problem);
  });
});

describe('what the API makes of them', () => {
  test('a seed-shaped body gives the spec it gave before: no placement field at all', () => {
    const spec = apiAnswer({ ...base, name: 'web', cpu: 2, ram: 1024, disk: '20G', ip: '10.0.0.5', gateway: '10.0.0.1' });
    expect(spec).toEqual({ os: 'debian', version: '12', name: 'web', cores: 2, ramMb: 1024, diskGb: 20, user: 'debian' });
  });

  test('tags as Proxmox keeps them: lower case, unique, sorted; empty ones mean none', () => {
    expect(apiAnswer({ ...base, tags: ['Web', 'prod', 'web', 'a_b+c.d-e'] })).toMatchObject({ tags: ['a_b+c.d-e', 'prod', 'web'] });
    expect(apiAnswer({ ...base, tags: [], description: '' })).not.toHaveProperty('tags');
    expect(apiAnswer({ ...base, description: '' })).not.toHaveProperty('description');
    expect(proxmoxTags(['debian', 'Prod', 'debian', 'db'])).toBe('db;debian;prod');
    expect(proxmoxTags(['debian'])).toBe('debian');
  });

  test('a description with any other control character passes: Proxmox stores it escaped (encode_text) and reads it back', () => {
    const text = 'tab\there\r\nbell\u0007 esc\u001b del\u007f';
    expect(apiAnswer({ ...base, description: text })).toMatchObject({ description: text });
  });

  test('pool, storage and description pass as given', () => {
    expect(apiAnswer({ ...base, pool: 'lab/web', storage: 'fast-zfs', description: 'Owner: ops\n# hi' })).toMatchObject({
      pool: 'lab/web',
      storage: 'fast-zfs',
      description: 'Owner: ops\n# hi',
    });
  });

  test("the worker's schema refuses what the API refuses", () => {
    const spec = { os: 'debian', version: '12', cores: 1, ramMb: 512, diskGb: 16, user: 'debian' };
    for (const bad of [{ tags: ['a b'] }, { pool: 'a b' }, { storage: '1x' }, { description: 'x'.repeat(8193) }, { description: 'a\u0000b' }]) {
      expect(() => checkInput(installSpecSchema, { ...spec, ...bad }, 'createVm')).toThrow(new RegExp(`: ${Object.keys(bad)[0]}`));
    }
  });
});

describe("Proxmox's commands carry them", () => {
  test('qm create --pool and qm set --tags, each one argument', () => {
    expect(qmCreate(120, { name: 'web-120', description: 'a\nb', pool: 'lab' })).toEqual(['qm', 'create', '120', '--name', 'web-120', '--description', 'a\nb', '--pool', 'lab']);
    expect(qmSet(120, { tags: proxmoxTags(['debian', 'web']) })).toEqual(['qm', 'set', '120', '--tags', 'debian;web']);
  });

  test("Proxmox's refusal of a missing pool is a permission failure no retry heals", () => {
    const err = classifyFailure({ node: 'pve1', command: 'qm create 120', exitCode: 255, stderr: "403 Permission check failed (pool 'nope' does not exist)\n" });
    expect(err).toBeInstanceOf(PermissionDeniedError);
    expect(err.retryable).toBe(false);
  });
});

describe("the operator's description beside the sealed markers", () => {
  const seal = new MarkerSeal(new Map([['k1', crypto.randomBytes(32)]]), 'k1');
  const forged = ['qemurun-owner=install-evil', 'qemurun-run=run-evil', 'qemurun-adopted=2020 workflow=x run=y', 'qemurun-seal=k1:AAAA'].join('\n');
  const spec: InstallSpec = { os: 'debian', version: '12', vmid: 120, cores: 2, ramMb: 1024, diskGb: 20, user: 'debian', tags: ['web'], pool: 'lab', storage: 'local-lvm', description: `notes\n${forged}` };
  const markers = { instance: '6f1c1f0e-9a57-4d5e-8f00-000000000120', owner: 'install-1', run: 'run-1', spec: specMarkerValue(spec) };
  const description = installedDescription(markers, seal.seal({ vmid: 120, ...markers }), spec.description);
  const vm = (text: string) => ({ description: text, entries: { smbios1: `uuid=${markers.instance}` } });

  test('comes after the seal line; marker-like lines in it neither forge nor break the markers', () => {
    expect(description.split('\n').slice(5)).toEqual(['notes', ...forged.split('\n')]);
    const check = seal.check(vm(description), 120);
    expect(check).toEqual({ sealed: true, fields: { vmid: 120, ...markers } });
    expect(specOf(description)).toEqual(spec);
  });

  test('the spec marker keeps tags, pool, storage and the description, which a rebuild re-creates the VM from', () => {
    expect(sealedSpec(seal.check(vm(description), 120))).toEqual(spec);
  });

  test('markers written before (no text after the seal) read as they did', () => {
    const old = installedDescription(markers, seal.seal({ vmid: 120, ...markers }));
    expect(old).toBe(description.split('\n').slice(0, 5).join('\n'));
    expect(seal.check(vm(old), 120).sealed).toBe(true);
  });
});

describe("the API's checks of a pool and a storage, on the main node", () => {
  const GiB = 1024 ** 3;
  const storages: Array<StorageStatus & { content: string[] }> = [
    { name: 'local', type: 'dir', status: 'active', totalBytes: 100 * GiB, usedBytes: 0, availableBytes: 100 * GiB, content: ['iso', 'vztmpl', 'backup'] },
    { name: 'local-lvm', type: 'lvmthin', status: 'active', totalBytes: 100 * GiB, usedBytes: 90 * GiB, availableBytes: 10 * GiB, content: ['images', 'rootdir'] },
    { name: 'nfs-backup', type: 'nfs', status: 'inactive', totalBytes: 0, usedBytes: 0, availableBytes: 0, content: ['images'] },
    { name: 'pbs', type: 'pbs', status: 'active', totalBytes: 100 * GiB, usedBytes: 0, availableBytes: 100 * GiB, content: ['backup'] },
  ];
  const node = {
    node: 'pve1',
    storageStatus: async (o: { content?: string } = {}) => storages.filter((s) => !o.content || s.content.includes(o.content)),
    pools: async () => ['lab', 'prod'],
  } as unknown as ProxmoxNode;

  test.each<[string, number, string | undefined]>([
    ['local-lvm', 8, undefined],
    ['nosuch', 8, "storage 'nosuch' does not exist on node 'pve1'"],
    ['pbs', 8, "storage 'pbs' has type pbs; disks need one of dir, zfspool, lvmthin, nfs"],
    ['nfs-backup', 8, "storage 'nfs-backup' is inactive, not active"],
    ['local', 8, "storage 'local' does not support vm images"],
    ['local-lvm', 20, "storage 'local-lvm' has 10G free, less than the 20G disk"],
  ])('storage %s for %iG', async (storage, diskGb, problem) => {
    expect(await storageProblem(node, storage, diskGb)).toBe(problem);
  });

  test('a pool the cluster has passes; another is named with the ones it has', async () => {
    expect(await poolProblem(node, 'lab')).toBeUndefined();
    expect(await poolProblem(node, 'Lab')).toBe("pool 'Lab' does not exist (the pools: lab, prod)");
  });
});

test('SANDBOX_POOLS seeds the sandbox cluster with pools; none by default', () => {
  expect(loadConfig({}).sandboxOptions.pools).toEqual([]);
  expect(loadConfig({ SANDBOX_POOLS: 'lab, prod,team/web' }).sandboxOptions.pools).toEqual(['lab', 'prod', 'team/web']);
  expect(() => loadConfig({ SANDBOX_POOLS: 'my pool' })).toThrow(/SANDBOX_POOLS: must list Proxmox pool names/);
});
