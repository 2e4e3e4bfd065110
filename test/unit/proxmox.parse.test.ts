import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  parseImportDisk,
  parseMigrationLine,
  parsePvesmStatus,
  parseQmList,
  parseQmStatus,
  parseTransferProgress,
} from '../../lib/proxmox/parse';
import {
  agentFileOf,
  clusterResourcesOf,
  nextIdOf,
  nodeStatusOf,
  nodesOf,
  num,
  parseAgentFileRead,
  parseClusterResources,
  parseNextId,
  parseNodeStatus,
  parseNodes,
  parseVersion,
  versionOf,
} from '../../lib/proxmox/pvesh';
import { decodeText, parseDrive, parseSize, vmConfigOf } from '../../lib/proxmox/vmConfig';
import { parseVmConfig } from '../../lib/proxmox/vmConfigText';

const fixture = (name: string) => readFileSync(path.join(__dirname, '..', 'fixtures', 'proxmox', name), 'utf8');

describe('qm config', () => {
  it('parses a real cloud-init VM config', () => {
    const c = parseVmConfig(fixture('qm-config-cloudinit.txt'));
    expect(c).toMatchObject({ name: 'cld-api', cores: 1, memory: 1024, balloon: 0, cpu: 'host', tags: [] });
    expect(c.entries.cipassword).toBe('**********');
    expect(c.entries.net0).toBe('virtio=BC:24:11:D1:D4:90,bridge=vmbr0,firewall=1');
    expect(c.disks).toEqual([
      { key: 'ide2', volid: 'local-zfs:vm-301-cloudinit', options: { media: 'cdrom' }, cdrom: true },
      {
        key: 'scsi0',
        volid: 'local-zfs:vm-301-disk-0',
        options: { discard: 'ignore', iothread: '1', size: '30G', ssd: '1' },
        sizeBytes: 30 * 1024 ** 3,
        cdrom: false,
      },
    ]);
    expect(c.description).toBeUndefined();
    expect(c.lock).toBeUndefined();
  });

  it('decodes a multi-line description, sshkeys, tags, lock and unused disks', () => {
    const c = parseVmConfig(fixture('qm-config-description.txt'));
    expect(c.description).toBe('qemurun-owner: wf-123\nspec: {"os":"debian"}\n名前 ✓');
    expect(c.sshkeys).toBe('\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx+k= root@pve1\nssh-rsa AAAAB3Nza/= user@laptop\n');
    expect(c.tags).toEqual(['debian', 'qemurun']);
    expect(c.lock).toBe('migrate');
    expect(c.disks.map((d) => [d.key, d.volid, d.sizeBytes])).toEqual([
      ['ide2', 'local-lvm:vm-120-cloudinit', undefined],
      ['scsi0', 'local-lvm:vm-120-disk-0', 2252 * 1024 ** 2],
      ['unused0', 'local-lvm:vm-120-disk-1', undefined],
    ]);
  });

  it('reads the config file format: # description, [PENDING], snapshots ignored', () => {
    const c = parseVmConfig(fixture('vm-120.conf'));
    expect(c.description).toBe('qemurun-owner: wf-123\nsecond line ✓');
    expect(c.cores).toBe(2);
    expect(c.memory).toBe(2048);
    expect(c.pending).toEqual({ memory: '4096', delete: 'balloon' });
    expect(c.entries.snaptime).toBeUndefined();
  });

  it('types entries whichever side gave them: numbers or their text, sshkeys decoded, the description as given', () => {
    const fromNumbers = vmConfigOf({ cores: 2, memory: 2048, balloon: 0, description: 'a%3Ab\nc', sshkeys: 'ssh-ed25519%20AAAA%20k%0A' });
    const fromText = vmConfigOf({ cores: '2', memory: '2048', balloon: '0', description: 'a%3Ab\nc', sshkeys: 'ssh-ed25519%20AAAA%20k%0A' });
    expect(fromNumbers).toEqual(fromText);
    expect(fromNumbers).toMatchObject({ cores: 2, memory: 2048, balloon: 0, description: 'a%3Ab\nc', sshkeys: 'ssh-ed25519 AAAA k\n' });
    expect(fromNumbers.entries.cores).toBe('2');
  });

  it('decodes the description of qm config text, and the # lines of the file, before typing', () => {
    expect(parseVmConfig('description: a%3Ab%0Ac\n').entries.description).toBe('a:b\nc');
    expect(parseVmConfig('#a%3Ab\n#c\ncores: 1\n').entries.description).toBe('a:b\nc');
  });

  it('handles sizes, drives and escaped text', () => {
    expect(parseSize('2G')).toBe(2 * 1024 ** 3);
    expect(parseSize('3584M')).toBe(3584 * 1024 ** 2);
    expect(parseSize('10737418240')).toBe(10737418240);
    expect(parseSize('1.5T')).toBe(1.5 * 1024 ** 4);
    expect(parseSize('big')).toBeUndefined();
    expect(parseDrive('scsi0', 'local:100/vm-100-disk-0.qcow2,size=16G')).toMatchObject({
      volid: 'local:100/vm-100-disk-0.qcow2',
      sizeBytes: 16 * 1024 ** 3,
    });
    expect(decodeText('100%25 %E2%9C%93%0A')).toBe('100% ✓\n');
  });
});

describe('qm status / qm list', () => {
  it('reads the state', () => {
    expect(parseQmStatus('status: running\n')).toBe('running');
    expect(parseQmStatus('status: stopped\n')).toBe('stopped');
    expect(parseQmStatus('status: paused\n')).toBe('paused');
    expect(() => parseQmStatus('')).toThrow(/unexpected qm status/);
  });

  it('parses real qm list output with its padding', () => {
    expect(parseQmList(fixture('qm-list-real.txt'))).toEqual([
      { vmid: 100, name: 'hmi-scada', status: 'running', memoryMb: 2048, bootDiskGb: 0, pid: 1695 },
      { vmid: 101, name: 'plc-controller', status: 'running', memoryMb: 2048, bootDiskGb: 0, pid: 1856 },
    ]);
  });

  it('splits on whitespace, so a long name pushing the columns is fine; no VMs is no output', () => {
    const rows = parseQmList(fixture('qm-list-code.txt'));
    expect(rows.map((r) => [r.vmid, r.name, r.status, r.bootDiskGb, r.pid])).toEqual([
      [100, 'debian12-tpl', 'stopped', 3, 0],
      [101, 'web01', 'running', 32, 12345],
      [102, 'a-name-longer-than-twenty-chars', 'running', 16, 777],
    ]);
    expect(parseQmList('')).toEqual([]);
  });
});

describe('qm importdisk', () => {
  it('reads the PVE 8.3+ final line', () => {
    expect(parseImportDisk(fixture('importdisk-pve83.txt'))).toEqual({ slot: 'unused0', volid: 'local-lvm:vm-612-disk-0' });
  });
  it('reads the PVE <= 8.2 final line', () => {
    expect(parseImportDisk(fixture('importdisk-pve82.txt'))).toEqual({ slot: 'unused1', volid: 'luks3-lvm:vm-102-disk-3' });
  });
  it('reads a --target-disk line with its drive options, on directory storage', () => {
    expect(parseImportDisk(fixture('importdisk-dir-target-disk.txt'))).toEqual({ slot: 'scsi0', volid: 'local:119/vm-119-disk-0.raw' });
  });
  it('fails clearly without a final line', () => {
    expect(() => parseImportDisk('importing disk ...\n')).toThrow(/no 'successfully imported disk' line/);
  });
  it('parses transfer progress lines', () => {
    expect(parseTransferProgress('transferred 498.3 GiB of 500.0 GiB (99.67%)')).toEqual({
      transferredBytes: Math.round(498.3 * 1024 ** 3),
      totalBytes: 500 * 1024 ** 3,
      percent: 99.67,
    });
    expect(parseTransferProgress('transferred 0.0 B of 2.0 GiB (0.00%)')?.percent).toBe(0);
    expect(parseTransferProgress("importing disk 'x' to VM 1 ...")).toBeUndefined();
  });
});

describe('pvesm status', () => {
  it('parses the table, KiB to bytes, N/A for a disabled storage', () => {
    const rows = parsePvesmStatus(fixture('pvesm-status.txt'));
    expect(rows.map((r) => r.name)).toEqual(['local', 'local-lvm', 'nfs-iso', 'old']);
    expect(rows[1]).toEqual({
      name: 'local-lvm',
      type: 'lvmthin',
      status: 'active',
      totalBytes: 1793429504 * 1024,
      usedBytes: 61235713 * 1024,
      availableBytes: 1732193790 * 1024,
      usedPercent: 3.41,
    });
    expect(rows[2].status).toBe('inactive');
    expect(rows[3].status).toBe('disabled');
    expect(rows[3].usedPercent).toBeUndefined();
  });
  it('accepts output without a header', () => {
    expect(parsePvesmStatus(fixture('pvesm-status-noheader.txt'))).toEqual([
      expect.objectContaining({ name: 'pbs-server', type: 'pbs', status: 'active', usedPercent: 8.07 }),
    ]);
  });
});

describe('pvesh', () => {
  it('parses /nodes, online and offline', () => {
    expect(parseNodes(fixture('pvesh-nodes.json'))).toEqual([
      {
        node: 'pve1',
        status: 'online',
        cpu: 0.0123,
        maxcpu: 16,
        mem: 5242880000,
        maxmem: 67316350976,
        disk: 6154321920,
        maxdisk: 100861726720,
        uptime: 604800,
      },
      { node: 'pve2', status: 'offline' },
    ]);
  });

  it('parses /nodes/<n>/status with numeric strings', () => {
    const s = parseNodeStatus(fixture('pvesh-node-status.json'));
    expect(s.cpuinfo).toMatchObject({ cpus: 32, sockets: 1, cores: 16, mhz: 2999.998, model: 'AMD EPYC 7302 16-Core Processor' });
    expect(s.cpuinfo.flags).toContain('avx2');
    expect(s.loadavg).toEqual([0.12, 0.2, 0.18]);
    expect(s.memory.total).toBe(67316350976);
    expect(s.pveversion).toBe('pve-manager/8.3.0/c1689ccb1065a83b');
  });

  it('parses /cluster/resources per type; vm includes containers', () => {
    const text = fixture('pvesh-cluster-resources-vm.json');
    const vms = parseClusterResources(text, 'vm');
    expect(vms.map((v) => [v.type, v.vmid, v.node, v.status, v.template])).toEqual([
      ['qemu', 100, 'pve-node1', 'running', false],
      ['qemu', 9000, 'pve1', 'stopped', true],
      ['lxc', 108, 'proxmox', 'stopped', false],
    ]);
    expect(vms[0]).toMatchObject({ maxmem: 4294967296, maxcpu: 1, hastate: 'started', pool: 'CephPool', name: 'proxmox-dev' });
    expect(vms[1].tags).toEqual(['debian', 'template']);
    expect(parseClusterResources(text, 'storage')).toEqual([
      expect.objectContaining({ storage: 'local', node: 'pve1', plugintype: 'dir', shared: false, maxdisk: 2000 }),
    ]);
  });

  it('accepts nextid as "100" (json) and 100 (text)', () => {
    expect(parseNextId('"100"\n')).toBe(100);
    expect(parseNextId('100\n')).toBe(100);
    expect(() => parseNextId('')).toThrow();
  });

  it('types the data the API answers as it types what pvesh prints of it', () => {
    // pvesh prints the `data` member the API answers: the CLI parses that text, the API
    // hands over the value itself, and both come out the same.
    for (const [file, fromText, fromData] of [
      ['pvesh-nodes.json', parseNodes, nodesOf],
      ['pvesh-node-status.json', parseNodeStatus, nodeStatusOf],
      ['pvesh-cluster-resources-vm.json', (t: string) => parseClusterResources(t, 'vm'), (d: unknown) => clusterResourcesOf(d, 'vm')],
    ] as const) {
      const text = fixture(file);
      expect(fromData(JSON.parse(text))).toEqual(fromText(text));
    }
    const version = { version: '8.4.1', release: '8.4', repoid: '2a5fa54a' };
    expect(versionOf(version)).toEqual(parseVersion(JSON.stringify(version)));
    const file = { content: 'ssh-ed25519 AAAA root@guest\n', 'bytes-read': 27 };
    expect(agentFileOf(file)).toBe(parseAgentFileRead(JSON.stringify(file)));
    expect(nextIdOf('100')).toBe(100);
    expect(nextIdOf(101)).toBe(101);
    expect(() => nextIdOf(null)).toThrow(/nextid/);
  });

  it('reads numbers and numeric strings alike', () => {
    expect(num('3791.478')).toBe(3791.478);
    expect(num(7)).toBe(7);
    expect(num('')).toBeUndefined();
    expect(num('abc')).toBeUndefined();
  });

  it('rejects output that is not JSON', () => {
    expect(() => parseNodes('')).toThrow(/printed nothing/);
    expect(() => parseNodes('┌──────┐')).toThrow(/no JSON/);
  });
});

describe('qm migrate lines', () => {
  it('follows an offline migration to its end', () => {
    const lines = fixture('migrate-offline.txt').trim().split('\n').map(parseMigrationLine);
    expect(lines[0]).toEqual({ time: '2025-03-01 10:00:00', message: "starting migration of VM 102 to node 'pve2' (10.10.10.52)", error: false });
    expect(lines.at(-1)?.finished).toEqual({ durationSec: 93 });
    expect(lines.some((l) => l.error)).toBe(false);
  });

  it('reads block-job lines without a timestamp and their progress', () => {
    const lines = fixture('migrate-online.txt').trim().split('\n').map(parseMigrationLine);
    const mirror = lines.find((l) => l.message.startsWith('mirror-scsi0: transferred 1.0 GiB'));
    expect(mirror).toMatchObject({ error: false, progress: { percent: 3.13, totalBytes: 32 * 1024 ** 3 } });
    expect(mirror?.time).toBeUndefined();
    expect(lines.at(-1)?.finished).toEqual({ durationSec: 150 });
  });

  it('reads ERROR lines and the abort reason', () => {
    const lines = fixture('migrate-aborted.stdout.txt').trim().split('\n').map(parseMigrationLine);
    expect(lines.filter((l) => l.error)).toHaveLength(2);
    expect(lines.at(-1)?.aborted).toEqual({ reason: "Problem found while scanning volumes - can't migrate VM - check log" });
  });
});
