import fs from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs, usageLine, type CommandDef, type Params } from '../args';
import { CliError, paramError } from '../errors';
import type { Ctx } from '../context';
import * as f from '../formats';
import { VMID } from '../vmOptions';
import { nodeOf } from '../../state/model';
import { addVmToPool, poolExists, poolMissingText } from '../../state/pools';
import { vmProcess } from '../../state/runtime';
import { claimVmid, moveVmid, releaseVmid } from '../../state/vmlist';
import { allocVolume, cloneVolume, freeVolume, getVolume, isBaseVolname, type Volume } from '../../state/volumes';
import { isSharedStorage, storageOpDelay, withStorageLock } from '../../state/storageLock';
import { allocationLines, requireImages, storageFor } from '../storage';
import { transferLines } from './image';
import { checkLock, diskEntries, formatSize, isCdrom, isCloudinit, loadVm, printDrive, withVmLock, writeVm, type Drive } from './vm';

export const CLONE_DEF: CommandDef = {
  name: 'qm clone',
  args: ['vmid', 'newid'],
  props: {
    vmid: VMID,
    newid: VMID,
    name: { type: 'string', optional: true, format: f.dnsName },
    description: { type: 'string', optional: true },
    pool: { type: 'string', optional: true },
    snapname: { type: 'string', optional: true },
    storage: { type: 'string', optional: true, format: f.storageId },
    format: { type: 'string', optional: true, enum: ['raw', 'qcow2', 'vmdk'] },
    full: { type: 'boolean', optional: true },
    target: { type: 'string', optional: true, format: f.nodeName },
    bwlimit: { type: 'integer', optional: true, minimum: 0 },
  },
};

/** Which volumes a storage type can clone (linked) and copy (full): Plugin.pm volume_has_feature. */
function hasFeature(storageType: string, feature: 'clone' | 'copy', volname: string): boolean {
  const base = isBaseVolname(volname);
  if (feature === 'copy') return true; // base, current and snapshots, on every type the sandbox has
  // Linked clones need a base volume (LVM-thin and ZFS could also clone a snapshot).
  return base && ['dir', 'nfs', 'lvmthin', 'zfspool'].includes(storageType);
}

/**
 * `qm clone` (API2/Qemu.pm clone_vm, QemuServer.pm clone_disk): a copy of a VM or template.
 * A template's disks are linked clones by default (vdisk_clone under the storage lock), a
 * VM's are full copies; the cloud-init drive is always a new one; every NIC gets a new MAC
 * and the SMBIOS UUID a new value. The new config exists with `lock: clone` while the disks
 * are made; a failure frees what was made and removes it.
 */
export function qmClone(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(CLONE_DEF, argv);
  const vmid = Number(p.vmid);
  const newid = Number(p.newid);
  const running = Boolean(vmProcess(ctx.dir, vmid));
  checkClone(ctx, p);
  // clone_vm's `$lock_source_vm`: a running source is locked exclusively, a stopped one (a
  // template) shared (lock_config_shared), so parallel clones of one template go on
  // together while a qm set, migrate or destroy of it waits for them and times out. Each
  // lock waits 1 s.
  const cloneUnderLocks = () => withVmLock(ctx, newid, () => cloneLocked(ctx, p, checkClone(ctx, p)), 1000);
  withVmLock(ctx, vmid, cloneUnderLocks, 1000, !running);
  return 0;
}

const targetOf = (ctx: Ctx, p: Params) => (p.target === ctx.node || p.target === 'localhost' ? undefined : p.target);

/**
 * clone_vm's `$load_and_check`: run before the task forks (the API answers these itself) and
 * again under the locks. `access` is its privilege checks on the source's config, in their
 * place (the API's; `qm` runs as root@pam, whom they let pass).
 */
export function checkClone(ctx: Ctx, p: Params, access?: (conf: Record<string, string>) => void) {
  const vmid = Number(p.vmid);
  const newid = Number(p.newid);
  const target = targetOf(ctx, p);
  if (p.pool !== undefined && !poolExists(ctx.model, p.pool)) throw new CliError(`403 ${poolMissingText(p.pool)}`);
  if (target && !nodeOf(ctx.model, target)) throw new CliError(`no such cluster node '${target}'`);
  if (p.storage !== undefined) {
    const s = storageFor(ctx, p.storage);
    if (!s.content.includes('images')) throw paramError({ storage: `storage '${p.storage}' does not support vm images` }, usageLine(CLONE_DEF));
    if (target) {
      storageFor(ctx, p.storage, target);
      if (!isSharedStorage(s)) throw new CliError(`can't clone to non-shared storage '${p.storage}'`);
    }
  }
  const source = loadVm(ctx, vmid);
  checkLock(source);
  if (p.snapname !== undefined) throw new CliError(`snapshot '${p.snapname}' does not exist`);
  const full = p.full !== undefined ? p.full === '1' : source.props.template !== '1';
  if (p.storage !== undefined && !full) throw new CliError("parameter 'storage' not allowed for linked clones");
  if (p.format !== undefined && !full) throw new CliError("parameter 'format' not allowed for linked clones");
  access?.(source.props);

  const newconf: Record<string, string> = { lock: 'clone' };
  const drives: Array<{ key: string; drive: Drive; full: boolean }> = [];
  let shared = true;
  for (const [key, value] of Object.entries(source.props)) {
    if (['parent', 'snaptime', 'vmstate', 'snapstate', 'runningcpu', 'runningmachine', 'running-nets-host-mtu'].includes(key) || /^unused\d+$/.test(key)) continue;
    if (/^net\d+$/.test(key)) {
      newconf[key] = value.replace(/^([a-z0-9]+)=([0-9A-F:]{17})/i, (_, model: string) => `${model}=${randomMac(ctx.model.macPrefix)}`);
      continue;
    }
    const entry = diskEntries({ props: { [key]: value }, sections: '' })[0];
    if (!entry || (isCdrom(entry.drive) && !isCloudinit(entry.drive))) {
      newconf[key] = value;
      continue;
    }
    const vol = getVolume(ctx.dir, ctx.node, entry.drive.volid);
    const storage = storageFor(ctx, vol?.storage ?? entry.drive.volid.split(':')[0]);
    if (!isSharedStorage(storage)) shared = false;
    const copy = full || isCloudinit(entry.drive) || key === 'tpmstate0';
    const volname = vol?.volname ?? entry.drive.volid.slice(entry.drive.volid.indexOf(':') + 1);
    if (!hasFeature(storage.type, copy ? 'copy' : 'clone', volname)) {
      throw new CliError(`${copy ? 'Full' : 'Linked'} clone feature is not supported for '${entry.drive.volid}' (${key})`);
    }
    drives.push({ key, drive: entry.drive, full: copy });
  }
  if (target && !shared) throw new CliError(`can't clone VM to node '${target}' (VM uses local storage)`);
  if (fs.existsSync(ctx.paths.conf(ctx.node, newid))) throw new CliError(`unable to create VM ${newid}: config file already exists`);
  return { source, full, newconf, drives };
}

function cloneLocked(ctx: Ctx, p: Params, { source, newconf, drives }: ReturnType<typeof checkClone>): void {
  const vmid = Number(p.vmid);
  const newid = Number(p.newid);
  const target = targetOf(ctx, p);
  newconf.smbios1 = (newconf.smbios1 ?? '').replace(/(^|,)uuid=[^,]*/, '').replace(/^,/, '');
  newconf.smbios1 = [`uuid=${randomUUID()}`, newconf.smbios1].filter(Boolean).join(',');
  if (newconf.vmgenid) newconf.vmgenid = randomUUID();
  delete newconf.template;
  newconf.name = p.name ?? `Copy-of-VM-${source.props.name ?? vmid}`;
  // The description is no `key: value` line but the config's leading comment: clone_vm
  // copies the source's with every other option, and `description` replaces it.
  const description = p.description || source.description;

  // file_set_contents of the temporary config (pve-common PVE/File.pm): `$load_and_check`
  // looked for the config on this node only, and pmxcfs (pve-cluster memdb.c memdb_rename)
  // refuses the rename onto a VMID another node holds with EEXIST, before any disk is made.
  const owner = claimVmid(ctx.dir, newid, ctx.node);
  if (owner !== undefined && owner !== ctx.node) throw new CliError(`close (rename) atomic file '/etc/pve/${ctx.paths.confDisplay(ctx.node, newid)}' failed: File exists`);
  if (owner !== undefined) throw new CliError(`unable to create VM ${newid}: config file already exists`);
  writeVm(ctx, newid, { props: { lock: 'clone' }, sections: '' });
  const made: Volume[] = [];
  try {
    for (const { key, drive, full: copy } of drives.sort((a, b) => a.key.localeCompare(b.key))) {
      ctx.out(`create ${copy ? 'full' : 'linked'} clone of drive ${key} (${drive.volid})`);
      const from = getVolume(ctx.dir, ctx.node, drive.volid);
      const storage = storageFor(ctx, copy && p.storage ? p.storage : (from?.storage ?? drive.volid.split(':')[0]));
      requireImages(storage);
      let vol: Volume;
      if (!copy) {
        if (!from) throw new CliError(`clone image '${drive.volid}' error: volume does not exist`);
        vol = withStorageLock(ctx.model, ctx.paths.locksDir, storage, () => {
          storageOpDelay(ctx.model);
          return cloneVolume(ctx.dir, ctx.node, storage, from, newid);
        });
        if (storage.type === 'lvmthin') ctx.out(`  Logical volume "${vol.volname}" created.`);
      } else {
        const format = (p.format as Volume['format'] | undefined) ?? (storage.type === 'lvmthin' || storage.type === 'zfspool' ? 'raw' : (from?.format ?? 'raw'));
        const size = from?.sizeBytes ?? 4 * 1024 * 1024;
        vol = allocVolume(ctx.dir, ctx.node, storage, newid, format, size, { cloudinit: isCloudinit(drive), ...(from?.source ? { source: from.source } : {}) });
        for (const l of allocationLines(storage, vol.volname, format, size)) ctx.out(l);
        if (!isCloudinit(drive)) for (const l of transferLines(size)) ctx.out(l);
      }
      made.push(vol);
      newconf[key] = printDrive({ volid: vol.volid, opts: { ...drive.opts, ...(isCdrom(drive) ? {} : { size: formatSize(vol.sizeBytes) }) } });
      writeVm(ctx, newid, { props: { ...newconf }, sections: '' });
    }
    delete newconf.lock;
    writeVm(ctx, newid, { props: newconf, sections: '', ...(description !== undefined ? { description } : {}) });
    // The storage is shared (checked above): moving the config moves the VM.
    if (target) {
      writeVm(ctx, newid, { props: newconf, sections: '', ...(description !== undefined ? { description } : {}) }, target);
      fs.rmSync(ctx.paths.conf(ctx.node, newid), { force: true });
      moveVmid(ctx.dir, newid, target);
    }
  } catch (e) {
    for (const v of made) freeVolume(ctx.dir, ctx.node, v.volid);
    fs.rmSync(ctx.paths.conf(ctx.node, newid), { force: true });
    releaseVmid(ctx.dir, newid);
    throw new CliError(`clone failed: ${e instanceof Error ? e.message : String(e)}`);
  }
  // The disks share the source's contents, and so does a process guest's root.
  const guestRoot = ctx.paths.guestDir(vmid);
  if (fs.existsSync(guestRoot)) fs.cpSync(guestRoot, ctx.paths.guestDir(newid), { recursive: true, verbatimSymlinks: true });
  if (p.pool !== undefined) addVmToPool(ctx.dir, p.pool, newid);
}

function randomMac(prefix: string): string {
  return `${prefix}:${[...randomBytes(3)].map((b) => b.toString(16).toUpperCase().padStart(2, '0')).join(':')}`;
}
