import crypto from 'node:crypto';
import { parseTemplateMarker, TEMPLATE_TAG, type OsName, type TemplateInfo, type TemplateMarker, type TemplateTarget } from '../../contract';
import type { Config } from '../config';
import { INIT_SCRIPT_VERSION } from '../initScripts';
import type { ProxmoxCluster, ProxmoxNode } from '../proxmox';
import { disksNotBase, isBaseVolume } from '../proxmox/baseVolume';
import type { VmConfig, VmDisk } from '../proxmox/vmConfig';
import { markerSealFor } from './markerSeal';

/**
 * The templates of the cluster as QemuRun sees them: every VM whose config says
 * `template: 1`, whose disks `qm template` finished turning into base volumes, and whose
 * markers this QemuRun sealed with a template marker. A template marker written by hand, or
 * copied from another VM, is not sealed for that VM and is not a template here; nor is a
 * VM whose conversion failed after Proxmox wrote `template: 1` (its disks are still
 * `vm-<vmid>-disk-N`, which a linked clone cannot stand on).
 */

/**
 * What a template's guest is prepared with, as one digest: the init script's version and the
 * settings the shared part of the script reads (packages, mirror). Per-VM settings (timezone,
 * swap, root password, the account) are applied on every clone, so they are not in it.
 */
export function templateRecipe(config: Pick<Config, 'initScript'>, os: OsName, version: string): string {
  const { packages, mirror, locale } = config.initScript;
  const text = JSON.stringify({ script: INIT_SCRIPT_VERSION, os, version, packages: [...packages].sort(), mirror: mirror ?? '', locale });
  return crypto.createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/**
 * Every sealed template of the cluster, newest first, with its state for this configuration.
 * `/cluster/resources` says where each VM is, but its `template` (and `name`) are what
 * pvestatd last reported, up to a status cycle old: a template built a moment ago is still
 * `template: 0` there. So the VMs it flags and those tagged as QemuRun's templates (tags it
 * reads from the config, at once) are looked at in their own config, which is current.
 */
export async function readTemplates(config: Config, proxmox: ProxmoxCluster, now = Date.now()): Promise<TemplateInfo[]> {
  const seal = markerSealFor(config);
  const found: Array<TemplateMarker & { vmid: number; name?: string; node: string }> = [];
  for (const vm of await proxmox.vms()) {
    if (!vm.template && !vm.tags.includes(TEMPLATE_TAG)) continue;
    const node = proxmox.node(vm.node);
    if (!node) continue;
    const conf = await node.config(vm.vmid).catch(() => undefined);
    if (conf?.entries.template !== '1') continue;
    const check = seal.check(conf, vm.vmid);
    const marker = check.sealed ? parseTemplateMarker(check.fields.template) : undefined;
    if (!marker) continue;
    if ((await unconvertedDisks(node, vm.vmid, conf)).length > 0) continue;
    const name = conf.name ?? vm.name;
    found.push({ ...marker, vmid: vm.vmid, ...(name !== undefined ? { name } : {}), node: vm.node });
  }
  found.sort((a, b) => b.builtAt.localeCompare(a.builtAt) || b.vmid - a.vmid);
  const newest = new Map<string, number>();
  return found.map((t) => {
    const key = `${t.os}/${t.version}/${t.storage}`;
    const first = !newest.has(key);
    if (first) newest.set(key, t.vmid);
    const fresh = t.recipe === templateRecipe(config, t.os, t.version) && now - Date.parse(t.builtAt) <= config.templates.maxAgeMs;
    const state: TemplateInfo['state'] = !first ? 'retired' : fresh ? 'current' : 'stale';
    return { ...t, state };
  });
}

/** Whether a template was built for this target (storage absent: ASSIGN_STORAGE). */
export function templateIsFor(t: TemplateMarker, target: TemplateTarget, assignStorage: string): boolean {
  return t.os === target.os && t.version === target.version && t.storage === (target.storage ?? assignStorage);
}

/**
 * The disks of a VM with `template: 1` that `qm template` should have made base volumes and
 * did not (../proxmox/baseVolume): empty once the conversion finished. The node's storage
 * types are asked only when a disk is no base volume (thick LVM keeps its names).
 */
export async function unconvertedDisks(node: ProxmoxNode, vmid: number, conf: Pick<VmConfig, 'disks'>): Promise<VmDisk[]> {
  if (conf.disks.every((d) => d.cdrom || /^unused\d+$/.test(d.key) || isBaseVolume(d.volid, vmid))) return [];
  const types = new Map((await node.storageStatus()).map((s) => [s.name, s.type]));
  return disksNotBase(conf, vmid, (storage) => types.get(storage));
}
