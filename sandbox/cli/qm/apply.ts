import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { CliError, paramError } from '../errors';
import type { Ctx } from '../context';
import type { Params } from '../args';
import { parsePropertyString, type VmConf } from '../../state/vmconf';
import { allocVolume, freeVolume, getVolume, splitVolid, supportsFormat, defaultFormat, type Volume } from '../../state/volumes';
import { looksHashed, newSalt, sha256Crypt } from '../../state/sha256crypt';
import { isDriveName } from '../vmOptions';
import { allocationLines, contentFile, requireActive, storageFor } from '../storage';
import { firstFreeUnused, formatSize, isCdrom, isCloudinit, parseDrive, printDrive } from './vm';
import { probeImage, transferLines } from './image';
import { copyIntoVolume, keepsContents, volumeFile } from '../../state/volumeData';
import { OVMF_VARS_BYTES, ovmfFiles } from '../../qemu/firmware';

/**
 * Applies create/set options to a config the way update_vm / create_vm store them:
 * hashed cipassword, normalised tags, MACs added to NICs, disks allocated, imported or
 * attached (with their size), replaced disks kept as unusedN.
 * `allocated` collects new volumes so a failed create can free them.
 */
export function applyVmOptions(ctx: Ctx, vmid: number, conf: VmConf, params: Params, allocated: Volume[], usage: string): void {
  for (const key of Object.keys(params).sort()) {
    const value = params[key];
    if (key === 'description') conf.description = value;
    else if (key === 'tags') conf.props.tags = normaliseTags(value);
    else if (key === 'cipassword') conf.props.cipassword = hashPassword(value, params.ostype ?? conf.props.ostype);
    else if (/^net\d+$/.test(key)) conf.props[key] = withMac(value, ctx.model.macPrefix);
    else if (isDriveName(key)) applyDrive(ctx, vmid, conf, key, value, allocated);
    else conf.props[key] = value;
  }
  checkBalloon(conf);
  if (params.machine !== undefined) checkMachine(conf);
  if (params.boot !== undefined) checkBootOrder(conf, usage);
}

/** Split on `,` `;` or spaces, lower-cased, de-duplicated, sorted, joined with `;`. */
function normaliseTags(value: string): string {
  const tags = [...new Set(value.split(/[;,\s]+/).filter(Boolean).map((t) => t.toLowerCase()))];
  return tags.sort().join(';');
}

function hashPassword(value: string, ostype: string | undefined): string {
  if (ostype && /^w/.test(ostype)) return value; // Windows guests get the plain text
  return looksHashed(value) ? value : sha256Crypt(value, newSalt());
}

function withMac(value: string, prefix: string): string {
  const [first, ...rest] = value.split(',');
  let model = first;
  let mac: string | undefined;
  if (first.startsWith('model=')) model = first.slice(6);
  else [model, mac] = first.split('=');
  const opts = rest.filter((p) => !p.startsWith('macaddr='));
  mac ??= rest.find((p) => p.startsWith('macaddr='))?.slice(8);
  if (!mac) {
    const bytes = randomBytes(3);
    mac = `${prefix}:${[...bytes].map((b) => b.toString(16).toUpperCase().padStart(2, '0')).join(':')}`;
  }
  return [`${model}=${mac.toUpperCase()}`, ...opts.sort()].join(',');
}

function checkBalloon(conf: VmConf): void {
  const memory = Number(conf.props.memory ?? 512);
  const balloon = conf.props.balloon;
  if (balloon !== undefined && Number(balloon) > memory) {
    throw new CliError('balloon value too large (must be smaller than assigned memory)');
  }
}

/** qemu-server Machine.pm: an Intel vIOMMU needs the q35 machine. */
function checkMachine(conf: VmConf): void {
  const m = parsePropertyString(conf.props.machine ?? '', 'type');
  if (m.viommu === 'intel' && !/q35/.test(m.type ?? '')) throw new CliError('to use Intel vIOMMU please set the machine type to q35');
}

/**
 * The size of a new EFI disk (qemu-server OVMF.pm `create_efidisk`): the OVMF vars template
 * it is copied from, whatever size the command gave (`local-lvm:1`): 540672 bytes for
 * `efitype=4m` (OVMF_VARS_4M.fd), 131072 for the default 2m (OVMF_VARS.fd).
 */
function efiVarsBytes(opts: Record<string, string>, key: string): number {
  const type = opts.efitype ?? '2m';
  if (type !== '2m' && type !== '4m') {
    throw paramError({ [key]: 'invalid format - format error', [`${key}.efitype`]: `value '${type}' does not have a value in the enumeration '2m, 4m'` }, 'qm set <vmid> [OPTIONS]');
  }
  return OVMF_VARS_BYTES[type];
}

/**
 * OVMF.pm `create_efidisk`: a new EFI disk starts as the OVMF vars template, for real
 * guests to boot with (process guests keep no disk contents).
 */
function writeEfiVars(ctx: Ctx, vol: Volume, efidisk: string): void {
  const { vars } = ovmfFiles({ props: { efidisk0: efidisk }, sections: '' });
  if (!fs.existsSync(vars)) throw new CliError(`EFI vars image '${vars}' not found`);
  copyIntoVolume(volumeFile(ctx.dir, ctx.node, vol.storage, vol.volname), vol.format, vars);
}

function checkBootOrder(conf: VmConf, usage: string): void {
  const m = /(?:^|,)order=([^,]+)/.exec(conf.props.boot ?? '');
  if (!m) return;
  for (const dev of m[1].split(';')) {
    if (conf.props[dev] === undefined) {
      throw paramError({ boot: `invalid bootorder: device '${dev}' does not exist'` }, usage);
    }
  }
}

const NEW_DISK = /^(?:([^/:\s]+):)?(\d+(?:\.\d+)?)$/;

function applyDrive(ctx: Ctx, vmid: number, conf: VmConf, key: string, value: string, allocated: Volume[]): void {
  const drive = parseDrive(value);
  const previous = conf.props[key] !== undefined ? parseDrive(conf.props[key]) : undefined;
  const created = (d: string) => ctx.out(`${key}: successfully created disk '${d}'`);

  const ci = /^([^/:\s]+):cloudinit$/.exec(drive.volid);
  const fresh = NEW_DISK.exec(drive.volid);
  if (drive.volid === 'none' || drive.volid === 'cdrom' || (!ci && !fresh && !splitVolid(drive.volid))) {
    conf.props[key] = value;
  } else if (ci) {
    const other = Object.keys(conf.props).find((k) => k !== key && isDriveName(k) && isCloudinit(parseDrive(conf.props[k])));
    if (other) throw new CliError(`${key} - cloud-init drive is already attached at '${other}'`);
    const s = storageFor(ctx, ci[1]);
    requireActive(s);
    const format = supportsFormat(s, 'qcow2') ? 'qcow2' : 'raw';
    for (const l of allocationLines(s, `vm-${vmid}-cloudinit`, format, 4 * 1024 * 1024)) ctx.out(l);
    const vol = allocVolume(ctx.dir, ctx.node, s, vmid, format, 4 * 1024 * 1024, { cloudinit: true });
    allocated.push(vol);
    conf.props[key] = printDrive({ volid: vol.volid, opts: { ...drive.opts, media: 'cdrom' } });
    created(conf.props[key]);
  } else if (fresh) {
    const s = storageFor(ctx, fresh[1] ?? '');
    // qemu-server API2/Qemu.pm `$check_storage_access`: before the task, as a parameter error.
    if (!s.content.includes('images')) throw paramError({ storage: `storage '${s.id}' does not support vm images` }, 'qm set <vmid> [OPTIONS]');
    requireActive(s);
    const importFrom = drive.opts['import-from'];
    delete drive.opts['import-from'];
    let size = key === 'efidisk0' ? efiVarsBytes(drive.opts, key) : Math.round(Number(fresh[2]) * 1024 ** 3);
    let source: string | undefined;
    if (importFrom !== undefined) {
      if (Number(fresh[2]) !== 0) {
        throw paramError({ [key]: "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>" }, 'qm set <vmid> [OPTIONS]');
      }
      // A storage volume (`local:import/x.qcow2`, what download-url leaves) or a path.
      const volume = contentFile(ctx, importFrom);
      const file = volume?.file ?? importFrom;
      if (!fs.existsSync(file)) throw new CliError(`cannot import from '${importFrom}' - could not get file size of ${volume?.shown ?? importFrom}`);
      size = probeImage(file).virtualSize;
      source = file;
    }
    const format = (drive.opts.format as Volume['format']) ?? defaultFormat(s);
    delete drive.opts.format;
    const vol = allocVolume(ctx.dir, ctx.node, s, vmid, format, size, source ? { source } : {});
    allocated.push(vol);
    if (key === 'efidisk0' && keepsContents(ctx.dir)) writeEfiVars(ctx, vol, value);
    for (const l of allocationLines(s, vol.volname, format, size)) ctx.out(l);
    if (source) for (const l of transferLines(size)) ctx.out(l);
    if (previous && !isCdrom(previous) && !isCloudinit(previous) && getVolume(ctx.dir, ctx.node, previous.volid)) {
      conf.props[firstFreeUnused(conf)] = previous.volid;
    }
    conf.props[key] = printDrive({ volid: vol.volid, opts: { ...drive.opts, size: formatSize(vol.sizeBytes) } });
    created(conf.props[key]);
  } else {
    // An existing volume, typically the unusedN an import left behind.
    const { storage } = splitVolid(drive.volid)!;
    storageFor(ctx, storage);
    const vol = getVolume(ctx.dir, ctx.node, drive.volid);
    if (!vol) throw new CliError(`volume '${drive.volid}' does not exist`);
    for (const k of Object.keys(conf.props)) {
      if (/^unused\d+$/.test(k) && conf.props[k] === drive.volid) delete conf.props[k];
    }
    if (previous && previous.volid !== drive.volid && !isCdrom(previous) && getVolume(ctx.dir, ctx.node, previous.volid)) {
      conf.props[firstFreeUnused(conf)] = previous.volid;
    }
    const opts = isCdrom(drive) ? drive.opts : { ...drive.opts, size: formatSize(vol.sizeBytes) };
    conf.props[key] = printDrive({ volid: drive.volid, opts });
  }
}

/**
 * Proxmox's `protection: 1` guards what a VM's config holds of its disks (qemu-server
 * API2/Qemu.pm, the delete loop of update_vm: check_protection before removing an unused
 * disk, the vmstate or a drive). Other options still change: protection stops removal only.
 */
function refuseProtected(conf: VmConf, key: string, value: string): void {
  if (conf.props.protection !== '1') return;
  const what = /^unused\d+$/.test(key) ? `unused disk '${parseDrive(value).volid}'` : key === 'vmstate' ? `vmstate '${value}'` : isDriveName(key) ? `drive '${key}'` : undefined;
  if (what !== undefined) throw new CliError(`can't remove ${what} - protection mode enabled`);
}

/** Removes options (`--delete a,b`): disks become unusedN, a cloud-init drive is freed. */
export function deleteVmOptions(ctx: Ctx, conf: VmConf, list: string): void {
  for (const key of list.split(/[,;\s]+/).filter(Boolean)) {
    if (key === 'description') {
      delete conf.description;
      continue;
    }
    const value = conf.props[key];
    if (value === undefined) continue;
    refuseProtected(conf, key, value);
    delete conf.props[key];
    if (isDriveName(key) || /^unused\d+$/.test(key)) {
      const d = parseDrive(value);
      if (isCloudinit(d) || /^unused\d+$/.test(key)) freeVolume(ctx.dir, ctx.node, d.volid);
      else if (!isCdrom(d) && getVolume(ctx.dir, ctx.node, d.volid)) conf.props[firstFreeUnused(conf)] = d.volid;
    }
  }
}
