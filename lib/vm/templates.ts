import crypto from 'node:crypto';
import { parseTemplateMarker, type OsName, type TemplateInfo, type TemplateMarker, type TemplateTarget } from '../../contract';
import type { Config } from '../config';
import { INIT_SCRIPT_VERSION } from '../initScripts';
import type { ProxmoxCluster } from '../proxmox';
import { markerSealFor } from './markerSeal';

/**
 * The templates of the cluster as QemuRun sees them: every VM with `template: 1` whose
 * markers this QemuRun sealed with a template marker. A template marker written by hand, or
 * copied from another VM, is not sealed for that VM and is not a template here.
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

/** Every sealed template of the cluster, newest first, with its state for this configuration. */
export async function readTemplates(config: Config, proxmox: ProxmoxCluster, now = Date.now()): Promise<TemplateInfo[]> {
  const seal = markerSealFor(config);
  const found: Array<TemplateMarker & { vmid: number; name?: string; node: string }> = [];
  for (const vm of await proxmox.vms()) {
    if (!vm.template) continue;
    const node = proxmox.node(vm.node);
    if (!node) continue;
    const conf = await node.config(vm.vmid).catch(() => undefined);
    if (!conf) continue;
    const check = seal.check(conf.description, vm.vmid);
    const marker = check.sealed ? parseTemplateMarker(check.fields.template) : undefined;
    if (marker) found.push({ ...marker, vmid: vm.vmid, ...(vm.name !== undefined ? { name: vm.name } : {}), node: vm.node });
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
