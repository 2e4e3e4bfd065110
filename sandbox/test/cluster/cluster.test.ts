import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { startTestCluster, makeKeyPair, type TestCluster } from '../../testkit';
import { sha256Crypt } from '../../state/sha256crypt';
import { readCalls } from '../../state/callLog';
import { DEFAULT_PVE_VERSION, PVE_RELEASES } from '../../state/model';

/**
 * The sandbox's qm / pvesh / pvesm behave like Proxmox's (qm(1), pvesh(1), pvesm(1)):
 * same outputs, exit codes and error texts, state in the real config format.
 */
let t: TestCluster;

beforeAll(async () => {
  // The dir-storage tests put disks on `local`, which a stock install does not allow.
  // Config locks wait 300 ms here, not Proxmox's 10 s.
  t = await startTestCluster({ storageContent: { local: ['backup', 'images', 'iso', 'vztmpl'] }, lockTimeoutMs: 300 });
});
afterAll(async () => {
  await t.dispose();
});
afterEach(async () => {
  await t.cluster.clearFaults();
});

function run(node: string, argv: string[], opts: { timeout?: number } = {}) {
  return execa(argv[0], argv.slice(1), { env: t.cluster.envFor(node), reject: false, timeout: opts.timeout });
}
const qm = (node: string, ...args: string[]) => run(node, ['qm', ...args]);

const CREATE = ['--name', 'vm', '--cores', '1', '--cpu', 'x86-64-v2-AES', '--scsihw', 'virtio-scsi-pci', '--memory', '1024', '--ostype', 'l26', '--agent', '1', '--net0', 'virtio,bridge=vmbr0', '--serial0', 'socket'];

async function qcow2(name: string, size: string): Promise<string> {
  const file = path.join(t.tmp, name);
  await execa('qemu-img', ['create', '-f', 'qcow2', file, size]);
  return file;
}

describe('qm create', () => {
  test('a second create of the same VMID fails with the real error, cluster-wide', async () => {
    const first = await qm('pve1', 'create', '200', ...CREATE);
    expect(first.exitCode).toBe(0);
    expect(first.stdout).toBe('');

    const again = await qm('pve1', 'create', '200', ...CREATE);
    expect(again.exitCode).toBe(255);
    expect(again.stderr).toBe("unable to create VM 200 - VM 200 already exists on node 'pve1'");

    const onOtherNode = await qm('pve2', 'create', '200', ...CREATE);
    expect(onOtherNode.exitCode).not.toBe(0);
    expect(onOtherNode.stderr).toBe("unable to create VM 200 - VM 200 already exists on node 'pve1'");
  });

  test('writes the config qm create writes: MAC with the PVE prefix, meta, smbios1, vmgenid, boot', async () => {
    await qm('pve1', 'create', '201', ...CREATE);
    const conf = (await t.cluster.readConfig(201))!;
    expect(conf).toMatch(/^net0: virtio=BC:24:11:[0-9A-F]{2}:[0-9A-F]{2}:[0-9A-F]{2},bridge=vmbr0$/m);
    expect(conf).toMatch(/^meta: creation-qemu=[\d.]+,ctime=\d+$/m);
    expect(conf).toMatch(/^smbios1: uuid=[0-9a-f-]{36}$/m);
    expect(conf).toMatch(/^vmgenid: [0-9a-f-]{36}$/m);
    expect(conf).toMatch(/^boot: order=net0$/m);
    const keys = conf.trim().split('\n').map((l) => l.split(':')[0]);
    expect(keys).toEqual([...keys].sort());
  });

  test('each created VM is its own instance: a new SMBIOS uuid and generation id; a given smbios1 is kept, vmgenid 1 means generate', async () => {
    await qm('pve1', 'create', '207', ...CREATE);
    await qm('pve1', 'create', '208', ...CREATE, '--smbios1', 'uuid=00000000-1111-2222-3333-444444444444', '--vmgenid', '1');
    const [a, b, c] = await Promise.all([201, 207, 208].map(async (id) => (await t.cluster.readConfig(id))!));
    const uuid = (conf: string) => /^smbios1: uuid=([0-9a-f-]{36})$/m.exec(conf)?.[1];
    const genid = (conf: string) => /^vmgenid: ([0-9a-f-]{36})$/m.exec(conf)?.[1];
    expect(uuid(a)).not.toBe(uuid(b));
    expect(genid(a)).not.toBe(genid(b));
    expect(uuid(c)).toBe('00000000-1111-2222-3333-444444444444');
    expect(genid(c)).toMatch(/^[0-9a-f]{8}-/);
  });

  test("smbios1 is checked as qemu-server's pve-qm-smbios1 format checks it, before anything is created", async () => {
    const usage = 'qm create <vmid> [OPTIONS]';
    const cases: Array<[string, string[]]> = [
      ['uuid=not-a-uuid', ['smbios1: invalid format - format error', 'smbios1.uuid: value does not match the regex pattern']],
      ['uuid=00000000-1111-2222-3333-4444444444445', ['smbios1: invalid format - format error', 'smbios1.uuid: value does not match the regex pattern']],
      ['uuid=00000000-1111-2222-3333-444444444444,colour=red', ['smbios1: invalid format - invalid key in comma-separated list property: colour']],
      ['00000000-1111-2222-3333-444444444444', ['smbios1: invalid format - value without key, but schema does not define a default key']],
      ['family=not base64', ['smbios1: invalid format - format error', 'smbios1.family: value does not match the regex pattern']],
    ];
    for (const [smbios1, lines] of cases) {
      const create = await qm('pve1', 'create', '209', ...CREATE, '--smbios1', smbios1);
      expect([create.exitCode, create.stderr]).toEqual([255, ['400 Parameter verification failed.', ...lines, usage].join('\n')]);
    }
    expect(await t.cluster.readConfig(209)).toBeUndefined();
    expect((await qm('pve1', 'create', '209', ...CREATE, '--smbios1', 'uuid=AAAAAAAA-1111-2222-3333-444444444444,base64=1,family=UUVNVQ==')).exitCode).toBe(0);
    expect(await t.cluster.readConfig(209)).toMatch(/^smbios1: uuid=AAAAAAAA-1111-2222-3333-444444444444,base64=1,family=UUVNVQ==$/m);
  });

  test('parameter errors are schema errors with the usage line', async () => {
    const bad = await qm('pve1', 'create', '99', '--name', 'bad_name');
    expect(bad.exitCode).not.toBe(0);
    expect(bad.stderr).toBe(
      [
        '400 Parameter verification failed.',
        'name: invalid format - value does not look like a valid DNS name',
        'vmid: invalid format - value does not look like a valid VM ID',
        'qm create <vmid> [OPTIONS]',
      ].join('\n'),
    );
    const notInt = await qm('pve1', 'create', 'abc');
    expect(notInt.stderr).toContain("vmid: type check ('integer') failed - got 'abc'");
    const unknown = await qm('pve1', 'set', '201', '--bogus', '1');
    expect(unknown.stderr).toBe('Unknown option: bogus\n400 unable to parse option\nqm set <vmid> [OPTIONS]');
    const balloon = await qm('pve1', 'create', '202', '--memory', '512', '--balloon', '1024');
    expect(balloon.stderr).toBe('unable to create VM 202 - balloon value too large (must be smaller than assigned memory)');
    expect(await t.cluster.readConfig(202)).toBeUndefined();
  });

  test('booleans as pve-common parses them: 1|on|yes|true, 0|off|no|false in any case, anything else a 400', async () => {
    expect((await qm('pve1', 'create', '206', ...CREATE, '--numa', 'Yes', '--agent', 'enabled=ON')).exitCode).toBe(0);
    expect((await qm('pve1', 'config', '206')).stdout).toMatch(/^numa: 1$/m);
    expect((await qm('pve1', 'set', '206', '--numa', 'FALSE')).exitCode).toBe(0);
    expect((await qm('pve1', 'config', '206')).stdout).toMatch(/^numa: 0$/m);
    const bad = await qm('pve1', 'set', '206', '--numa', 'maybe');
    expect([bad.exitCode, bad.stderr]).toEqual([255, '400 unable to parse boolean option\nqm set <vmid> [OPTIONS]']);
    // A property string's bare default-key value is not parsed as a boolean; `key=value` is.
    const agent = await qm('pve1', 'set', '206', '--agent', 'yes');
    expect(agent.stderr).toBe("400 Parameter verification failed.\nagent: invalid format - format error\nagent.enabled: invalid format - type check ('boolean') failed - got 'yes'\nqm set <vmid> [OPTIONS]");
  });

  test('concurrent creates of one VMID from 5 processes on two nodes: exactly one wins', async () => {
    const results = await Promise.all([0, 1, 2, 3, 4].map((i) => qm(i % 2 ? 'pve2' : 'pve1', 'create', '250', ...CREATE)));
    const winners = results.filter((r) => r.exitCode === 0);
    expect(winners).toHaveLength(1);
    for (const r of results.filter((x) => x.exitCode !== 0)) {
      expect(r.stderr).toMatch(/^unable to create VM 250 - VM 250 already exists on node 'pve[12]'$/);
    }
    const confs = ['pve1', 'pve2'].filter((n) => fs.existsSync(path.join(t.cluster.dir, 'nodes', n, 'qemu-server', '250.conf')));
    expect(confs).toHaveLength(1);
  });
});

describe('qm set / qm config', () => {
  test('--digest: a change made against another config is refused as update_vm and resize_vm refuse it', async () => {
    await qm('pve1', 'create', '211', ...CREATE, '--scsi0', 'local-lvm:1');
    const sha1 = async () => createHash('sha1').update((await t.cluster.readConfig(211))!).digest('hex');
    const seen = await sha1();
    expect((await qm('pve1', 'set', '211', '--name', 'first', '--digest', seen)).exitCode).toBe(0);
    const stale = await qm('pve1', 'set', '211', '--name', 'second', '--digest', seen);
    expect([stale.exitCode, stale.stderr]).toEqual([255, 'checksum mismatch (file change by other user?)']);
    const resize = await qm('pve1', 'resize', '211', 'scsi0', '+1G', '--digest', seen);
    // resize_vm runs as a task the CLI does not wait on for its exit code.
    expect([resize.exitCode, resize.stderr]).toEqual([0, 'checksum mismatch (file change by other user?)']);
    expect((await t.cluster.readConfig(211))!).toMatch(/^name: first$/m);
    expect((await qm('pve1', 'resize', '211', 'scsi0', '+1G', '--digest', await sha1())).exitCode).toBe(0);
  });

  test('round trip in the real file format: sshkeys URI-escaped, cipassword sha256-crypt, tags normalised', async () => {
    await qm('pve1', 'create', '210', ...CREATE);
    const key = makeKeyPair(t.tmp, 'k210', 'user@host');
    const set = await qm('pve1', 'set', '210', '--sshkeys', `${key.file}.pub`, '--cipassword', 's3cret pw', '--ciuser', 'alice', '--ciupgrade', '0', '--tags', 'Debian,template;debian', '--description', 'first: line\nsecond');
    expect(set.exitCode).toBe(0);
    const escaped = key.publicKey.replace(/%/g, '%25').replace(/ /g, '%20').replace(/\+/g, '%2B').replace(/\//g, '%2F').replace(/=/g, '%3D').replace(/@/g, '%40') + '%0A';
    expect(set.stdout).toBe(
      `update VM 210: -cipassword <hidden> -ciupgrade 0 -ciuser alice -description first: line\nsecond -sshkeys ${escaped} -tags Debian,template;debian`,
    );

    const conf = (await t.cluster.readConfig(210))!;
    expect(conf.startsWith('#first%3A line\n#second\n')).toBe(true);
    expect(conf).toContain(`\nsshkeys: ${escaped}\n`);
    expect(conf).toContain('\ntags: debian;template\n');
    const hash = /^cipassword: (\$5\$([^$]{8})\$\S{43})$/m.exec(conf);
    expect(hash).not.toBeNull();
    expect(hash![1]).toBe(sha256Crypt('s3cret pw', hash![2]));
    // openssl agrees: the hash is real SHA-256 crypt.
    const openssl = await execa('openssl', ['passwd', '-5', '-salt', hash![2], 's3cret pw']);
    expect(openssl.stdout).toBe(hash![1]);

    const shown = await qm('pve1', 'config', '210');
    expect(shown.stdout).toContain('cipassword: **********');
    expect(shown.stdout).toContain('description: first%3A line%0Asecond');
    expect(shown.stdout).not.toContain('$5$');
  });

  test('errors: missing config, locked VM, invalid key file content', async () => {
    const missing = await qm('pve1', 'set', '299', '--cores', '2');
    expect(missing.stderr).toBe("Configuration file 'nodes/pve1/qemu-server/299.conf' does not exist");
    expect(missing.exitCode).not.toBe(0);

    const junk = path.join(t.tmp, 'junk.pub');
    fs.writeFileSync(junk, 'not a key\n');
    const badKey = await qm('pve1', 'set', '210', '--sshkeys', junk);
    expect(badKey.stderr).toBe('SSH public key validation error');

    const conf = path.join(t.cluster.dir, 'nodes/pve1/qemu-server/210.conf');
    fs.appendFileSync(conf, 'lock: backup\n');
    const locked = await qm('pve1', 'set', '210', '--cores', '2');
    expect(locked.stderr).toBe('VM is locked (backup)');
    expect((await qm('pve1', 'unlock', '210')).exitCode).toBe(0);
    expect((await qm('pve1', 'set', '210', '--cores', '2')).exitCode).toBe(0);
  });
});

describe('disks', () => {
  test('importdisk records the qcow2 virtual size; set --scsi0 attaches it; resize grows it', async () => {
    await qm('pve1', 'create', '220', ...CREATE);
    const img = await qcow2('disk.qcow2', '2252M');
    const imp = await qm('pve1', 'importdisk', '220', img, 'local-lvm');
    expect(imp.exitCode).toBe(0);
    const lines = imp.stdout.split('\n');
    expect(lines[0]).toBe(`importing disk '${img}' to VM 220 ...`);
    expect(lines).toContain('transferred 0.0 B of 2.2 GiB (0.00%)');
    expect(lines.filter((l) => l === 'transferred 2.2 GiB of 2.2 GiB (100.00%)').length).toBeGreaterThanOrEqual(1);
    expect(lines[lines.length - 1]).toBe("unused0: successfully imported disk 'local-lvm:vm-220-disk-0'");
    expect(await t.cluster.readConfig(220)).toContain('\nunused0: local-lvm:vm-220-disk-0\n');

    const attach = await qm('pve1', 'set', '220', '--scsi0', 'local-lvm:vm-220-disk-0', '--ide2', 'local-lvm:cloudinit', '--boot', 'order=scsi0');
    expect(attach.stdout).toContain("ide2: successfully created disk 'local-lvm:vm-220-cloudinit,media=cdrom'");
    let conf = (await t.cluster.readConfig(220))!;
    expect(conf).toContain('\nscsi0: local-lvm:vm-220-disk-0,size=2252M\n');
    expect(conf).not.toContain('unused0');

    expect((await qm('pve1', 'resize', '220', 'scsi0', '+1G')).exitCode).toBe(0);
    conf = (await t.cluster.readConfig(220))!;
    expect(conf).toContain('\nscsi0: local-lvm:vm-220-disk-0,size=3276M\n');
    const abs = await qm('pve1', 'disk', 'resize', '220', 'scsi0', '16G');
    expect(abs.exitCode).toBe(0);
    expect(await t.cluster.readConfig(220)).toContain('size=16G');

    const shrink = await qm('pve1', 'resize', '220', 'scsi0', '8G');
    expect(shrink.stderr).toBe('shrinking disks is not supported');
    expect(shrink.exitCode).toBe(0); // the resize task has no exit handler (qemu-server >= 8.0)

    const list = await run('pve1', ['pvesm', 'list', 'local-lvm', '--vmid', '220']);
    expect(list.stdout).toMatch(/^local-lvm:vm-220-disk-0\s+raw\s+images\s+17179869184 220$/m);
  });

  test('storages are thin: pvesm counts what a disk holds, not its virtual size', async () => {
    const usedKiB = async (storage: string) => Number((await run('pve1', ['pvesm', 'status', '--storage', storage])).stdout.split('\n')[1].split(/\s+/)[4]);
    await qm('pve1', 'create', '225', ...CREATE);
    const before = await usedKiB('local');
    const image = await qcow2('thin.qcow2', '40G'); // a few hundred KiB of metadata
    expect((await qm('pve1', 'importdisk', '225', image, 'local')).exitCode).toBe(0);
    const imported = await usedKiB('local');
    expect(imported - before).toBe(Math.trunc(fs.statSync(image).size / 1024));
    // A new 32G disk and growing the imported one by 100G take no space until written.
    expect((await qm('pve1', 'set', '225', '--scsi1', 'local:32')).exitCode).toBe(0);
    expect((await qm('pve1', 'set', '225', '--scsi0', 'local:225/vm-225-disk-0.raw')).exitCode).toBe(0);
    expect((await qm('pve1', 'resize', '225', 'scsi0', '+100G')).exitCode).toBe(0);
    expect(await usedKiB('local')).toBe(imported);
    expect((await qm('pve1', 'destroy', '225', '--purge', '1')).exitCode).toBe(0);
    expect(await usedKiB('local')).toBe(before);
  });

  test('new data disks and an EFI disk: next free vm-<vmid>-disk-N, Proxmox texts, the vars size, purge frees them', async () => {
    await qm('pve1', 'create', '226', ...CREATE, '--machine', 'q35', '--bios', 'ovmf');
    const scsi1 = await qm('pve1', 'set', '226', '--scsi1', 'local-lvm:32');
    expect(scsi1.stdout).toContain("scsi1: successfully created disk 'local-lvm:vm-226-disk-0,size=32G'");
    const efi = await qm('pve1', 'set', '226', '--efidisk0', 'local-lvm:1,efitype=4m,pre-enrolled-keys=0');
    // The "1" is ignored: the 4m vars template (540672 bytes) rounded to LVM-thin's 4M extent.
    expect(efi.stdout).toContain("efidisk0: successfully created disk 'local-lvm:vm-226-disk-1,efitype=4m,pre-enrolled-keys=0,size=4M'");
    const onDir = await qm('pve1', 'set', '226', '--scsi2', 'local:8', '--efidisk0', 'local:1,efitype=4m');
    expect(onDir.stdout).toContain("efidisk0: successfully created disk 'local:226/vm-226-disk-0.raw,efitype=4m,size=528K'");
    expect(onDir.stdout).toContain("scsi2: successfully created disk 'local:226/vm-226-disk-1.raw,size=8G'");
    const conf = (await t.cluster.readConfig(226))!;
    expect(conf).toContain('\nmachine: q35\n');
    expect(conf).toContain('\nbios: ovmf\n');
    expect(conf).toContain('\nunused0: local-lvm:vm-226-disk-1\n'); // the replaced EFI disk, as Proxmox keeps it

    const nosuch = await qm('pve1', 'set', '226', '--scsi3', 'nosuch:4');
    expect([nosuch.exitCode, nosuch.stderr]).toEqual([255, "storage 'nosuch' does not exist"]);
    const badMachine = await qm('pve1', 'set', '226', '--machine', 'q36');
    expect(badMachine.stderr).toMatch(/^400 Parameter verification failed\.\nmachine: invalid format - format error\nmachine\.type: /);
    expect((await qm('pve1', 'set', '226', '--machine', 'pc-q35-8.1+pve0')).exitCode).toBe(0);
    expect((await qm('pve1', 'set', '226', '--machine', 'pc,viommu=intel')).stderr).toBe('to use Intel vIOMMU please set the machine type to q35');

    expect((await run('pve1', ['pvesm', 'list', 'local-lvm', '--vmid', '226'])).stdout.split('\n').filter((l) => l.startsWith('local-lvm:')).length).toBe(2);
    expect((await qm('pve1', 'destroy', '226', '--purge', '1')).exitCode).toBe(0);
    expect((await run('pve1', ['pvesm', 'list', 'local-lvm', '--vmid', '226'])).stdout).not.toContain('vm-226');
    expect((await run('pve1', ['pvesm', 'list', 'local', '--vmid', '226'])).stdout).not.toContain('vm-226');
  });

  test('bios ovmf without an EFI disk starts with a warning, as Proxmox does', async () => {
    await qm('pve1', 'create', '227', ...CREATE, '--bios', 'ovmf');
    const start = await qm('pve1', 'start', '227');
    expect([start.exitCode, start.stderr]).toEqual([0, 'WARN: no efidisk configured! Using temporary efivars disk.']);
    expect((await qm('pve1', 'stop', '227')).exitCode).toBe(0);
    expect((await qm('pve1', 'destroy', '227', '--purge', '1')).exitCode).toBe(0);
  });

  test('qm disk import: raw files, --target-disk, file storage naming, errors', async () => {
    await qm('pve1', 'create', '221', ...CREATE);
    const raw = path.join(t.tmp, 'disk.raw');
    fs.writeFileSync(raw, Buffer.alloc(3 * 1024 * 1024));
    const imp = await qm('pve1', 'disk', 'import', '221', raw, 'local', '--target-disk', 'scsi0');
    expect(imp.stdout.split('\n').pop()).toBe("scsi0: successfully imported disk 'local:221/vm-221-disk-0.raw,size=3M'");

    const hdr = Buffer.alloc(72);
    hdr.write('QFI\xfb', 0, 'latin1');
    hdr.writeUInt32BE(3, 4);
    hdr.writeBigUInt64BE(BigInt(5 * 1024 ** 3), 24);
    const handmade = path.join(t.tmp, 'handmade.qcow2');
    fs.writeFileSync(handmade, hdr);
    const imp2 = await qm('pve1', 'importdisk', '221', handmade, 'local-lvm');
    expect(imp2.stdout).toContain('transferred 5.0 GiB of 5.0 GiB (100.00%)');
    expect(imp2.stdout.split('\n').pop()).toBe("unused0: successfully imported disk 'local-lvm:vm-221-disk-0'");

    const missing = await qm('pve1', 'importdisk', '221', '/nonexistent.qcow2', 'local-lvm');
    expect(missing.stderr).toBe('/nonexistent.qcow2: non-existent or non-regular file');
    expect(missing.exitCode).not.toBe(0);
    const noStorage = await qm('pve1', 'importdisk', '221', raw, 'nope');
    expect(noStorage.stderr).toBe("storage 'nope' does not exist");
    const noImages = await qm('pve1', 'importdisk', '221', raw, 'nfs-backup');
    expect(noImages.stderr).toBe('storage nfs-backup does not support vm images');
  });
});

describe('qm migrate', () => {
  test('moves the config (and its disks) from pve1 to pve2 with a timestamped log', async () => {
    await qm('pve1', 'create', '230', ...CREATE);
    const img = await qcow2('m.qcow2', '1G');
    await qm('pve1', 'importdisk', '230', img, 'local-lvm');
    await qm('pve1', 'set', '230', '--scsi0', 'local-lvm:vm-230-disk-0');

    const mig = await qm('pve1', 'migrate', '230', 'pve2');
    expect(mig.exitCode).toBe(0);
    const lines = mig.stdout.split('\n');
    for (const l of lines) expect(l).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d /);
    expect(lines[0]).toMatch(/starting migration of VM 230 to node 'pve2' \(127\.0\.0\.1\)$/);
    expect(mig.stdout).toContain("found local disk 'local-lvm:vm-230-disk-0' (attached)");
    expect(lines[lines.length - 1]).toMatch(/ migration finished successfully \(duration \d\d:\d\d:\d\d\)$/);

    expect(fs.existsSync(path.join(t.cluster.dir, 'nodes/pve1/qemu-server/230.conf'))).toBe(false);
    expect(fs.existsSync(path.join(t.cluster.dir, 'nodes/pve2/qemu-server/230.conf'))).toBe(true);
    expect((await qm('pve1', 'config', '230')).stderr).toBe("Configuration file 'nodes/pve1/qemu-server/230.conf' does not exist");
    expect((await qm('pve2', 'config', '230')).stdout).toContain('scsi0: local-lvm:vm-230-disk-0,size=1G');
    // The disk moved with it: pve2 can resize it, pve1 no longer lists it.
    expect((await qm('pve2', 'resize', '230', 'scsi0', '+1G')).stderr).toBe('');
    expect((await run('pve1', ['pvesm', 'list', 'local-lvm', '--vmid', '230'])).stdout).not.toContain('vm-230');
  });

  test('refuses the local node, unknown nodes and running VMs without --online', async () => {
    await qm('pve1', 'create', '231', ...CREATE);
    const local = await qm('pve1', 'migrate', '231', 'pve1');
    expect(local.stderr).toBe('400 Parameter verification failed.\ntarget: target is local node.\nqm migrate <vmid> <target> [OPTIONS]');
    const unknown = await qm('pve1', 'migrate', '231', 'pve9');
    expect(unknown.stderr).toBe("no such cluster node 'pve9'");
    expect(unknown.exitCode).not.toBe(0);
  });
});

describe('qm power and listing without a guest OS', () => {
  test('start/status/stop/destroy, including the error texts', async () => {
    await qm('pve1', 'create', '240', ...CREATE);
    expect((await qm('pve1', 'status', '240')).stdout).toBe('status: stopped');
    expect((await qm('pve1', 'start', '240')).exitCode).toBe(0);
    expect((await qm('pve1', 'status', '240')).stdout).toBe('status: running');
    const again = await qm('pve1', 'start', '240');
    expect([again.exitCode, again.stderr]).toEqual([255, 'VM 240 already running']);
    const destroyRunning = await qm('pve1', 'destroy', '240');
    expect(destroyRunning.stderr).toBe('VM 240 is running - destroy failed');
    const list = await qm('pve1', 'list');
    expect(list.stdout.split('\n')[0]).toBe('      VMID NAME                 STATUS     MEM(MB)    BOOTDISK(GB) PID       ');
    expect(list.stdout).toMatch(/^ {7}240 vm {19}running {4}1024 {15}0\.00 \d+ *$/m);

    expect((await qm('pve1', 'stop', '240')).exitCode).toBe(0);
    expect((await qm('pve1', 'status', '240')).stdout).toBe('status: stopped');
    expect((await qm('pve1', 'stop', '240')).exitCode).toBe(0);
    const shutdown = await qm('pve1', 'shutdown', '240');
    expect([shutdown.exitCode, shutdown.stderr]).toEqual([0, 'VM 240 not running\n']);
    const reboot = await qm('pve1', 'reboot', '240');
    expect(reboot.exitCode).not.toBe(0);
    expect(reboot.stderr).toBe('VM 240 not running\n\nVM 240 not running');

    const destroy = await qm('pve1', 'destroy', '240', '--purge', '1');
    expect(destroy.stdout).toBe('purging VM 240 from related configurations..');
    expect(await t.cluster.readConfig(240)).toBeUndefined();
    expect((await qm('pve1', 'stop', '240')).stderr).toBe("unable to find configuration file for VM 240 on node 'pve1'");
    // The VMID is free again.
    expect((await qm('pve2', 'create', '240', ...CREATE)).exitCode).toBe(0);
  });
});

describe('protection', () => {
  test("while set, destroy and the removal of a drive, an unused disk or the vmstate fail in check_protection's words; other options change", async () => {
    await qm('pve1', 'create', '241', ...CREATE, '--scsi0', 'local-lvm:1', '--scsi1', 'local-lvm:1', '--protection', '1');
    const destroy = await qm('pve1', 'destroy', '241', '--purge', '1');
    expect([destroy.exitCode, destroy.stderr]).toEqual([255, "can't remove VM 241 - protection mode enabled"]);
    const drive = await qm('pve1', 'set', '241', '--delete', 'scsi1');
    expect([drive.exitCode, drive.stderr]).toEqual([255, "can't remove drive 'scsi1' - protection mode enabled"]);
    expect((await qm('pve1', 'set', '241', '--cores', '2', '--delete', 'serial0')).exitCode).toBe(0);
    expect((await qm('pve1', 'set', '241', '--delete', 'protection')).exitCode).toBe(0);
    expect((await qm('pve1', 'set', '241', '--delete', 'scsi1')).exitCode).toBe(0);
    expect(await t.cluster.readConfig(241)).toContain('\nunused0: local-lvm:vm-241-disk-1\n');
    expect((await qm('pve1', 'set', '241', '--protection', '1')).exitCode).toBe(0);
    const unused = await qm('pve1', 'set', '241', '--delete', 'unused0');
    expect([unused.exitCode, unused.stderr]).toEqual([255, "can't remove unused disk 'local-lvm:vm-241-disk-1' - protection mode enabled"]);
    expect((await qm('pve1', 'set', '241', '--protection', '0')).exitCode).toBe(0);
    expect((await qm('pve1', 'destroy', '241', '--purge', '1')).exitCode).toBe(0);
    expect(await t.cluster.readConfig(241)).toBeUndefined();
  });
});

describe('cicustom', () => {
  test("set and create check its format only; start reads each snippet, and a missing one is pve-storage's `can't find file`", async () => {
    // qemu-server checks `pve-qm-cicustom` (each key a pve-volume-id) when the option is set,
    // nothing about the volume: neither that it exists nor any privilege on its storage.
    const created = await qm('pve1', 'create', '285', '--ide2', 'local-lvm:cloudinit', '--cicustom', 'user=local:snippets/absent.yaml');
    expect([created.exitCode, created.stderr]).toEqual([0, '']);
    const bad = await qm('pve1', 'set', '285', '--cicustom', 'user=absent.yaml');
    expect([bad.exitCode, bad.stderr]).toEqual([
      255,
      "400 Parameter verification failed.\ncicustom: invalid format - format error\ncicustom.user: invalid format - unable to parse volume ID 'absent.yaml'\nqm set <vmid> [OPTIONS]",
    ]);
    // At start, Cloudinit.pm read_cloudinit_snippets_file: parse_volname, then pve-storage
    // Storage.pm abs_filesystem_path, which dies before file_get_contents could say `can't open`.
    const start = await qm('pve1', 'start', '285');
    expect([start.exitCode, start.stderr]).toEqual([255, "can't find file 'local:snippets/absent.yaml'"]);
    expect((await qm('pve1', 'set', '285', '--cicustom', 'user=local:iso/absent.yaml')).exitCode).toBe(0);
    const iso = await qm('pve1', 'start', '285');
    expect([iso.exitCode, iso.stderr]).toEqual([255, 'local:iso/absent.yaml is not in the snippets directory']);
    expect((await qm('pve1', 'status', '285')).stdout).toBe('status: stopped');
    expect((await qm('pve1', 'destroy', '285', '--purge', '1')).exitCode).toBe(0);
  });
});

describe('bridges', () => {
  test('a bridge the node lacks is taken at create and set, and fails the start: before QEMU on 9, as QEMU\'s ifup script fails it on 8.4', async () => {
    const create = await qm('pve1', 'create', '241', ...CREATE.map((a) => (a === 'virtio,bridge=vmbr0' ? 'virtio,bridge=vmbr9' : a)));
    expect(create.exitCode).toBe(0);
    // 9 reads every VirtIO NIC's bridge MTU as it builds QEMU's command line (print_netdevice_full).
    const start = await qm('pve1', 'start', '241');
    expect([start.exitCode, start.stdout, start.stderr]).toEqual([255, '', "bridge 'vmbr9' does not exist"]);
    // 8.4 only for a NIC with an mtu: QEMU runs, and the tap's ifup script fails.
    const file = `${t.cluster.dir}/sandbox/cluster.json`;
    const saved = fs.readFileSync(file, 'utf8');
    fs.writeFileSync(file, saved.replace(DEFAULT_PVE_VERSION, PVE_RELEASES['8.4']));
    try {
      const old = await qm('pve1', 'start', '241');
      expect([old.exitCode, old.stdout, old.stderr]).toEqual([
        255,
        "bridge 'vmbr9' does not exist\nkvm: -netdev type=tap,id=net0,ifname=tap241i0,script=/usr/libexec/qemu-server/pve-bridge,downscript=/usr/libexec/qemu-server/pve-bridgedown,vhost=on: network script /usr/libexec/qemu-server/pve-bridge failed with status 512",
        'start failed: QEMU exited with code 1',
      ]);
    } finally {
      fs.writeFileSync(file, saved);
    }
    expect((await qm('pve1', 'status', '241')).stdout).toBe('status: stopped');
    expect((await qm('pve1', 'set', '241', '--net0', 'virtio,bridge=vmbr0')).exitCode).toBe(0);
    expect((await qm('pve1', 'start', '241')).exitCode).toBe(0);
    expect((await qm('pve1', 'stop', '241')).exitCode).toBe(0);
  });
});

describe('NIC tag, mtu and bridge; nameserver', () => {
  const usage = 'qm set <vmid> [OPTIONS]';
  test('set refuses what qemu-server\'s net format refuses, in its words', async () => {
    expect((await qm('pve1', 'create', '245', ...CREATE)).exitCode).toBe(0);
    const cases: Array<[string, string[]]> = [
      ['virtio,bridge=vmbr0,tag=5000', ['net0: invalid format - format error', 'net0.tag: value must have a maximum value of 4094']],
      ['virtio,bridge=vmbr0,tag=0', ['net0: invalid format - format error', 'net0.tag: value must have a minimum value of 1']],
      ['virtio,bridge=vmbr0,tag=x', ['net0: invalid format - format error', "net0.tag: type check ('integer') failed - got 'x'"]],
      ['virtio,bridge=vmbr0,mtu=65521', ['net0: invalid format - format error', 'net0.mtu: value must have a maximum value of 65520']],
      ['virtio,bridge=vmbr/0', ['net0: invalid format - format error', "net0.bridge: invalid format - invalid bridge ID 'vmbr/0'"]],
      ['virtio,bridge=vmbr0,vlan=5', ['net0: invalid format - invalid key in comma-separated list property: vlan']],
    ];
    for (const [net0, lines] of cases) {
      const set = await qm('pve1', 'set', '245', '--net0', net0);
      expect([set.exitCode, set.stderr]).toEqual([255, ['400 Parameter verification failed.', ...lines, usage].join('\n')]);
    }
    const ns = await qm('pve1', 'set', '245', '--nameserver', '192.0.2.53 bad_name');
    expect(ns.stderr).toBe(['400 Parameter verification failed.', 'nameserver: invalid format - value does not look like a valid address: bad_name', usage].join('\n'));
    expect((await qm('pve1', 'set', '245', '--nameserver', '192.0.2.53 2001:db8::53', '--searchdomain', 'lab.example')).exitCode).toBe(0);
    expect((await qm('pve1', 'set', '245', '--net0', 'virtio,bridge=vmbr0,tag=4094,mtu=1400')).exitCode).toBe(0);
    expect((await qm('pve1', 'config', '245')).stdout).toMatch(/^net0: virtio=BC:24:11(:[0-9A-F]{2}){3},bridge=vmbr0,mtu=1400,tag=4094$/m);
  });

  test('pvesh lists the node\'s interfaces as Network.pm does, the bridges with --type bridge or any_bridge', async () => {
    const all = JSON.parse((await run('pve1', ['pvesh', 'get', '/nodes/pve1/network', '--output-format', 'json'])).stdout) as Array<{ iface: string; type: string }>;
    expect(all.map((i) => [i.iface, i.type])).toEqual([['eno1', 'eth'], ['vmbr0', 'bridge']]);
    for (const type of ['bridge', 'any_bridge']) {
      const bridges = JSON.parse((await run('pve1', ['pvesh', 'get', '/nodes/pve2/network', '--type', type, '--output-format', 'json'])).stdout);
      expect(bridges).toEqual([expect.objectContaining({ iface: 'vmbr0', type: 'bridge', active: 1, bridge_ports: 'eno1' })]);
    }
    const bad = await run('pve1', ['pvesh', 'get', '/nodes/pve1/network', '--type', 'wifi', '--output-format', 'json']);
    expect(bad.stderr).toMatch(/^400 Parameter verification failed\.\ntype: value 'wifi' does not have a value in the enumeration 'bridge, bond, eth, alias, vlan, OVSBridge, OVSBond, OVSPort, OVSIntPort, any_bridge'/);
  });

  test('start dies in config_to_command on an MTU the bridge (1500) cannot carry, or below 576', async () => {
    expect((await qm('pve1', 'set', '245', '--net0', 'virtio,bridge=vmbr0,mtu=9000')).exitCode).toBe(0);
    const big = await qm('pve1', 'start', '245');
    expect([big.exitCode, big.stdout, big.stderr]).toEqual([
      255,
      '',
      "netdev net0: MTU '9000' is bigger than the bridge MTU '1500' - adjust the MTU for the network device in the VM configuration, while ensuring that the bridge is configured as desired.",
    ]);
    expect((await qm('pve1', 'set', '245', '--net0', 'virtio,bridge=vmbr0,mtu=575')).exitCode).toBe(0);
    expect((await qm('pve1', 'start', '245')).stderr).toBe("netdev net0: MTU '575' is smaller than the IP minimum MTU '576'");
    // With an mtu, a missing bridge is found here too, before QEMU runs.
    expect((await qm('pve1', 'set', '245', '--net0', 'virtio,bridge=vmbr9,mtu=1400')).exitCode).toBe(0);
    const missing = await qm('pve1', 'start', '245');
    expect([missing.stdout, missing.stderr]).toEqual(['', "bridge 'vmbr9' does not exist"]);
    expect((await qm('pve1', 'status', '245')).stdout).toBe('status: stopped');
    expect((await qm('pve1', 'set', '245', '--net0', 'virtio,bridge=vmbr0,mtu=1500,tag=7')).exitCode).toBe(0);
    expect((await qm('pve1', 'start', '245')).exitCode).toBe(0);
    expect((await qm('pve1', 'stop', '245')).exitCode).toBe(0);
  });
});

describe('time and concurrency', () => {
  test('a VM\'s config lock held elsewhere: set, create and migrate time out with PVE::Tools::lock_file\'s text', async () => {
    expect((await qm('pve1', 'create', '242', ...CREATE)).exitCode).toBe(0);
    const held = [t.cluster.holdVmLock(242), t.cluster.holdVmLock(243)];
    try {
      const lockText = (id: number) => `can't lock file '/var/lock/qemu-server/lock-${id}.conf' - got timeout`;
      const set = await qm('pve1', 'set', '242', '--cores', '2');
      expect([set.exitCode, set.stderr]).toEqual([255, lockText(242)]);
      // create_vm's lock_config_full has no `unable to create VM` prefix on a timeout.
      const create = await qm('pve1', 'create', '243', ...CREATE);
      expect([create.exitCode, create.stderr]).toEqual([255, lockText(243)]);
      // AbstractMigrate's migrate: the phases run under lock_vm; a timeout aborts it.
      const migrate = await qm('pve1', 'migrate', '242', 'pve2');
      expect([migrate.exitCode, migrate.stderr]).toEqual([255, 'migration aborted']);
      expect(migrate.stdout).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d ERROR: migration aborted \\(duration 00:00:0\\d\\): ${lockText(242).replace(/[.()/]/g, '\\$&')}$`));
    } finally {
      for (const l of held) l.release();
    }
    expect((await qm('pve1', 'set', '242', '--cores', '2')).exitCode).toBe(0);
    expect((await qm('pve1', 'destroy', '242')).exitCode).toBe(0);
  });

  test('/cluster/resources shows a VM pvestatd has not reported yet as unknown, with its ids only', async () => {
    const file = path.join(t.cluster.dir, 'sandbox', 'cluster.json');
    const saved = fs.readFileSync(file, 'utf8');
    fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(saved), statusLagMs: 3_600_000 }));
    try {
      expect((await qm('pve1', 'create', '244', ...CREATE, '--tags', 'debian')).exitCode).toBe(0);
      const vms = JSON.parse((await run('pve1', ['pvesh', 'get', '/cluster/resources', '--type', 'vm', '--output-format', 'json'])).stdout);
      // pve-manager PVE/API2Tools.pm extract_vm_stats without RRD data; tags from the config.
      expect(vms.find((v: { vmid: number }) => v.vmid === 244)).toEqual({ id: 'qemu/244', node: 'pve1', status: 'unknown', tags: 'debian', type: 'qemu', vmid: 244 });
      // The node's own view is live (qm status, /nodes/<node>/qemu).
      expect((await qm('pve1', 'status', '244')).stdout).toBe('status: stopped');
    } finally {
      fs.writeFileSync(file, saved);
    }
    expect((await qm('pve1', 'destroy', '244')).exitCode).toBe(0);
  });
});

describe('pvesh and pvesm', () => {
  const pvesh = (...args: string[]) => run('pve1', ['pvesh', 'get', ...args, '--output-format', 'json']);

  test('/nodes, /nodes/<n>/status: CPU flags make a v2-AES cluster baseline', async () => {
    const nodes = JSON.parse((await pvesh('/nodes')).stdout);
    expect(nodes.map((n: { node: string }) => n.node)).toEqual(['pve1', 'pve2']);
    expect(nodes[0]).toMatchObject({ id: 'node/pve1', status: 'online', type: 'node', level: '' });
    expect(Object.keys(nodes[0])).toEqual([...Object.keys(nodes[0])].sort());

    const s1 = JSON.parse((await pvesh('/nodes/pve1/status')).stdout);
    const s2 = JSON.parse((await pvesh('/nodes/pve2/status')).stdout);
    const f1 = s1.cpuinfo.flags.split(' ');
    const f2 = s2.cpuinfo.flags.split(' ');
    for (const f of ['avx', 'avx2', 'bmi1', 'bmi2', 'fma', 'movbe', 'aes', 'pclmulqdq']) expect(f1).toContain(f);
    for (const f of ['cx16', 'lahf_lm', 'popcnt', 'sse4_1', 'sse4_2', 'ssse3', 'aes', 'pclmulqdq']) expect(f2).toContain(f);
    expect(f2).not.toContain('avx');
    expect(typeof s1.cpuinfo.mhz).toBe('string');
    expect(s1.loadavg.every((l: unknown) => typeof l === 'string')).toBe(true);
    expect(s1.memory.total).toBeGreaterThan(s2.memory.total);

    const unknown = await pvesh('/nodes/pve7/status');
    expect(unknown.exitCode).not.toBe(0);
  });

  test('/cluster/resources --type vm and /cluster/nextid', async () => {
    await qm('pve2', 'create', '260', ...CREATE, '--tags', 'ubuntu');
    const vms = JSON.parse((await pvesh('/cluster/resources', '--type', 'vm')).stdout);
    const vm = vms.find((v: { vmid: number }) => v.vmid === 260);
    expect(vm).toMatchObject({ id: 'qemu/260', type: 'qemu', node: 'pve2', status: 'stopped', template: 0, maxmem: 1024 * 1024 * 1024, maxcpu: 1, name: 'vm', tags: 'ubuntu' });
    expect(vms.every((v: { type: string }) => v.type === 'qemu')).toBe(true);

    const next = await pvesh('/cluster/nextid');
    expect(next.stdout).toMatch(/^"\d+"$/);
    const taken = await pvesh('/cluster/nextid', '--vmid', '260');
    expect(taken.stderr).toContain('vmid: VM 260 already exists');
    const text = await run('pve1', ['pvesh', 'get', '/cluster/nextid']);
    expect(text.stdout).toMatch(/^\d+$/);
    expect((await run('pve1', ['pvesh', 'get', '/nope'])).stderr).toBe("No 'get' handler defined for '/nope'");
  });

  test('pvesm status prints the exact printf layout in KiB', async () => {
    const out = (await run('pve2', ['pvesm', 'status'])).stdout.split('\n');
    // Oracle: coreutils printf with pvesm.pm's format strings (maxlen = longest ID + 1).
    const printf = async (fmt: string, ...args: string[]) => (await execa('printf', [fmt, ...args])).stdout;
    expect(out[0]).toBe(await printf('%-11s %10s %10s %15s %15s %15s %8s', 'Name', 'Type', 'Status', 'Total', 'Used', 'Available', '%'));
    const row = '%-11s %10s %10s %15d %15d %15d % 7.2f%%';
    const [name, type, status, total, used, avail] = out[1].split(/\s+/);
    expect([name, type, status]).toEqual(['local', 'dir', 'active']);
    expect(Number(total)).toBe((94 * 1024 ** 3) / 1024);
    expect(Number(total)).toBe(Number(used) + Number(avail));
    expect(out[1]).toBe(await printf(row, name, type, status, total, used, avail, ((Number(used) * 100) / Number(total)).toFixed(6)));
    expect(out[2]).toMatch(/^local-lvm +lvmthin +active /);
    expect(out[3]).toBe(await printf(row, 'nfs-backup', 'nfs', 'inactive', '0', '0', '0', '0'));
    expect(out).toHaveLength(4);
  });
});

describe('fault injection and the call log', () => {
  test('fails the next N matching calls with the given text and code, then succeeds', async () => {
    await t.cluster.injectFault({ command: 'qm create', node: 'pve1', times: 2, stderr: 'cluster not ready - no quorum?', exitCode: 111 });
    const a = await qm('pve1', 'create', '270', ...CREATE);
    const otherNode = await qm('pve2', 'create', '271', ...CREATE);
    const b = await qm('pve1', 'create', '270', ...CREATE);
    const c = await qm('pve1', 'create', '270', ...CREATE);
    expect([a.exitCode, a.stderr]).toEqual([111, 'cluster not ready - no quorum?']);
    expect(otherNode.exitCode).toBe(0);
    expect([b.exitCode, b.stderr]).toEqual([111, 'cluster not ready - no quorum?']);
    expect(c.exitCode).toBe(0);

    const calls = await t.cluster.calls();
    const creates = calls.filter((x) => x.argv[1] === 'create' && ['270', '271'].includes(x.argv[2]));
    expect(creates.map((x) => [x.node, x.argv[2], x.exitCode])).toEqual([
      ['pve1', '270', 111],
      ['pve2', '271', 0],
      ['pve1', '270', 111],
      ['pve1', '270', 0],
    ]);
    expect(creates[0].argv.slice(0, 3)).toEqual(['qm', 'create', '270']);
  });

  test('an alias matches (qm importdisk = qm disk import); latency delays the call', async () => {
    await t.cluster.injectFault({ command: 'qm importdisk', times: 1, stderr: 'copy failed: boom' });
    const f = await qm('pve1', 'disk', 'import', '270', '/nonexistent', 'local-lvm');
    expect(f.stderr).toBe('copy failed: boom');

    // Once: a call the fault does not match would use it up, and the call it matches,
    // made after, would not wait. The wait is a lower bound the sandbox's sleep guarantees.
    await t.cluster.injectFault({ command: 'pvesh get /cluster/resources', times: 1, latencyMs: 1000 });
    await run('pve1', ['pvesh', 'get', '/nodes', '--output-format', 'json']);
    const slow = await run('pve1', ['pvesh', 'get', '/cluster/resources', '--type', 'node', '--output-format', 'json']);
    expect(slow.exitCode).toBe(0);
    const pvesh = readCalls(t.cluster.dir).filter((c) => c.argv[0] === 'pvesh').slice(-2);
    expect(pvesh.map((c) => c.argv.slice(0, 3))).toEqual([['pvesh', 'get', '/nodes'], ['pvesh', 'get', '/cluster/resources']]);
    expect(pvesh[1].durationMs).toBeGreaterThanOrEqual(1000);
  });

  test('a hanging call hangs until killed; the kill is logged; the next call works', async () => {
    await t.cluster.injectFault({ command: 'qm status', node: 'pve1', times: 1, hangMs: 60_000 });
    // Killed by the caller's timeout (not ended by the hang running out): timedOut, and
    // the call log's SIGTERM exit below.
    const hung = await run('pve1', ['qm', 'status', '270'], { timeout: 1500 });
    expect(hung.timedOut).toBe(true);

    const next = await qm('pve1', 'status', '270');
    expect([next.exitCode, next.stdout]).toEqual([0, 'status: stopped']);
    const statusCalls = (await t.cluster.calls()).filter((c) => c.argv.join(' ') === 'qm status 270');
    expect(statusCalls.map((c) => c.exitCode)).toEqual([143, 0]);
  });
});
