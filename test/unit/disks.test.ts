import { installSpecSchema, checkInput, specMarkerValue, specOf, type InstallSpec } from '../../contract';
import { installAnswer } from '../support/installAnswer';
import { qmCreate, qmSet } from '../../lib/proxmox/commands';
import type { ProxmoxNode } from '../../lib/proxmox/node';
import type { StorageStatus } from '../../lib/proxmox/parse';
import { disksProblem } from '../../lib/vm/placement';
import { cloudinitDriveKey, extraDriveOptions } from '../../activities/vm';

/**
 * Disks, machine and firmware (issue 24, item 3): extra data disks, `machine`, `bios` with
 * its EFI disk, on the one schema, in the spec marker and in what is sent to Proxmox; a
 * seed-shaped body means what it meant.
 */

const base = { os: 'debian', version: '12' } as const;

const apiAnswer = (body: unknown) => installAnswer(body, { nodes: ['pve1'] });

describe("the API's 400s name the field", () => {
  test.each<[string, Record<string, unknown>, RegExp]>([
    ['disks not an array', { disks: '32G' }, /^disks: must be an array of \{ size, storage\? \}$/],
    ['a disk not an object', { disks: ['32G'] }, /^disks\[0\]: must be an object like/],
    ['a size without G', { disks: [{ size: '32' }] }, /^disks\[0\]\.size: must be a whole number of GiB \(1 or more\) followed by G/],
    ['a size of 0G', { disks: [{ size: '8G' }, { size: '0G' }] }, /^disks\[1\]\.size: must be a whole number of GiB/],
    ['a size too large', { disks: [{ size: '100000G' }] }, /^disks\[0\]\.size: /],
    ['a size missing', { disks: [{ storage: 'local-lvm' }] }, /^disks\[0\]\.size: is required$/],
    ['a storage with a colon', { disks: [{ size: '8G', storage: 'a:b' }] }, /^disks\[0\]\.storage: must be a Proxmox storage id/],
    ['an unknown key', { disks: [{ size: '8G', format: 'qcow2' }] }, /^unknown field\(s\): format$/],
    ['too many disks', { disks: Array.from({ length: 9 }, () => ({ size: '1G' })) }, /^disks: must be at most 8 disks$/],
    ['machine virt', { machine: 'virt' }, /^machine: must be "q35" or "pc"$/],
    ['bios uefi', { bios: 'uefi' }, /^bios: must be "seabios" or "ovmf"$/],
  ])('%s', (_name, fields, problem) => {
    expect(apiAnswer({ ...base, ...fields })).toMatch(problem);
  });
});

describe('what the API makes of them', () => {
  test('a seed-shaped body gives the spec it gave before: no disks, machine or bios', () => {
    const spec = apiAnswer({ ...base, disk: '20G' });
    expect(spec).toEqual({ os: 'debian', version: '12', cores: 1, ramMb: 512, diskGb: 20, user: 'debian' });
    expect(extraDriveOptions(spec as InstallSpec, 'local-lvm')).toEqual([]);
  });

  test('sizes in GiB, storage only when given; an empty list is none', () => {
    expect(apiAnswer({ ...base, disks: [{ size: '32G' }, { size: '1G', storage: 'fast' }], machine: 'q35', bios: 'ovmf' })).toMatchObject({
      disks: [{ sizeGb: 32 }, { sizeGb: 1, storage: 'fast' }],
      machine: 'q35',
      bios: 'ovmf',
    });
    expect(apiAnswer({ ...base, disks: [] })).not.toHaveProperty('disks');
  });

  test("the worker's schema refuses what the API refuses, and the spec marker keeps them for a rebuild", () => {
    const spec = { os: 'debian', version: '12', cores: 1, ramMb: 512, diskGb: 16, user: 'debian' } as const;
    for (const bad of [{ disks: [{ sizeGb: 0 }] }, { disks: [{ sizeGb: 1, storage: '1x' }] }, { machine: 'virt' }, { bios: 'uefi' }]) {
      expect(() => checkInput(installSpecSchema, { ...spec, ...bad }, 'createVm')).toThrow(new RegExp(`: ${Object.keys(bad)[0]}`));
    }
    const full: InstallSpec = { ...spec, disks: [{ sizeGb: 32 }, { sizeGb: 8, storage: 'fast' }], machine: 'q35', bios: 'ovmf' };
    expect(specOf(`qemurun-spec=${specMarkerValue(full)}`)).toEqual(full);
  });
});

describe("Proxmox's commands carry them", () => {
  test("the EFI disk first, then scsi1.. with Proxmox's new-disk syntax, on the install's storage unless a disk names its own", () => {
    const spec = { ...base, cores: 1, ramMb: 512, diskGb: 16, user: 'debian', disks: [{ sizeGb: 32 }, { sizeGb: 8, storage: 'fast' }], bios: 'ovmf' } as InstallSpec;
    expect(extraDriveOptions(spec, 'local-lvm')).toEqual([
      ['efidisk0', 'local-lvm:1,efitype=4m,pre-enrolled-keys=0'],
      ['scsi1', 'local-lvm:32'],
      ['scsi2', 'fast:8'],
    ]);
    expect(extraDriveOptions({ ...spec, storage: 'zfs' }, 'local-lvm').map(([, v]) => v)).toEqual(['zfs:1,efitype=4m,pre-enrolled-keys=0', 'zfs:32', 'fast:8']);
    expect(extraDriveOptions({ ...spec, bios: 'seabios' }, 'local-lvm').map(([k]) => k)).toEqual(['scsi1', 'scsi2']);
  });

  test('the cloud-init drive: ide2 on pc (as the seed made it), scsi30 on q35, whose ide2 is AHCI that Debian 12\'s genericcloud kernel lacks', () => {
    expect(cloudinitDriveKey({})).toBe('ide2');
    expect(cloudinitDriveKey({ machine: 'pc' })).toBe('ide2');
    expect(cloudinitDriveKey({ machine: 'q35' })).toBe('scsi30');
  });

  test('qm create --machine --bios and qm set --scsi1, each one argument', () => {
    expect(qmCreate(120, { name: 'web-120', machine: 'q35', bios: 'ovmf' })).toEqual(['qm', 'create', '120', '--name', 'web-120', '--machine', 'q35', '--bios', 'ovmf']);
    expect(qmSet(120, { scsi1: 'local-lvm:32' })).toEqual(['qm', 'set', '120', '--scsi1', 'local-lvm:32']);
  });
});

describe("the API's check of the disks' storages, on the main node", () => {
  const GiB = 1024 ** 3;
  const storages: Array<StorageStatus & { content: string[] }> = [
    { name: 'local', type: 'dir', status: 'active', totalBytes: 100 * GiB, usedBytes: 0, availableBytes: 100 * GiB, content: ['iso', 'vztmpl', 'backup'] },
    { name: 'local-lvm', type: 'lvmthin', status: 'active', totalBytes: 100 * GiB, usedBytes: 50 * GiB, availableBytes: 50 * GiB, content: ['images', 'rootdir'] },
    { name: 'fast', type: 'zfspool', status: 'active', totalBytes: 100 * GiB, usedBytes: 90 * GiB, availableBytes: 10 * GiB, content: ['images'] },
  ];
  const node = { node: 'pve1', storageStatus: async (o: { content?: string } = {}) => storages.filter((s) => !o.content || s.content.includes(o.content)) } as unknown as ProxmoxNode;
  const spec = (disks: InstallSpec['disks'], storage?: string) => ({ diskGb: 16, disks, ...(storage ? { storage } : {}) });

  test.each<[string, InstallSpec['disks'], string | undefined, string | undefined]>([
    ['none', undefined, undefined, undefined],
    ['fits beside the boot disk', [{ sizeGb: 32 }], undefined, undefined],
    ['the boot disk and this one do not fit together', [{ sizeGb: 16 }, { sizeGb: 20 }], undefined, "disks[1].size: storage 'local-lvm' has 50G free, less than the 52G this install puts there"],
    ['on another storage, counted there', [{ sizeGb: 30 }, { sizeGb: 10, storage: 'fast' }], undefined, undefined],
    ['too big for its own storage', [{ sizeGb: 11, storage: 'fast' }], undefined, "disks[0].size: storage 'fast' has 10G free, less than the 11G this install puts there"],
    ['a storage that does not exist', [{ sizeGb: 1, storage: 'nosuch' }], undefined, "disks[0].storage: storage 'nosuch' does not exist on node 'pve1'"],
    ['a storage without images', [{ sizeGb: 1, storage: 'local' }], undefined, "disks[0].storage: storage 'local' does not support vm images"],
    ['defaulting to the install storage', [{ sizeGb: 1 }], 'fast', "disks[0].size: storage 'fast' has 10G free, less than the 17G this install puts there"],
  ])('%s', async (_name, disks, storage, problem) => {
    expect(await disksProblem(node, spec(disks, storage), 'local-lvm')).toBe(problem);
  });
});
