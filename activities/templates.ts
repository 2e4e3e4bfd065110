import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { VmidTakenError } from '../lib/proxmox/errors';
import { linkedCloneSupported } from '../lib/proxmox/linkedClone';
import { describeDisks } from '../lib/proxmox/baseVolume';
import {
  type Activities,
  failure,
  installedDescription,
  installSpecSchema,
  type InstallSpec,
  type OsName,
  PENDING_INSTANCE,
  specMarkerValue,
  type TemplateChoice,
  type TemplateMarker,
  templateMarkerValue,
  checkedInput,
} from '../contract';
import { markerSealFor } from '../lib/vm/markerSeal';
import { vmInstanceOf } from '../lib/proxmox/vmInstance';
import { readTemplates, templateIsFor, templateRecipe, unconvertedDisks } from '../lib/vm/templates';
import { cloudinitDriveKey, hardwareOptions, isThisRunsVm, newVmIdentity, sealedForRun } from './vm';
import { withStorageSlot } from './storageSlots';

export interface TemplateDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

/**
 * Golden templates: the activities of the template build (workflows/template.ts)
 * and of an install that clones one (workflows/install.ts).
 */
export function templateActivities(deps: TemplateDeps) {
  const { config, proxmox } = deps;
  const storageOf = (storage: string | undefined) => storage ?? config.storage;

  return {
    /** What a template of this OS version would be built with now, and on which storage. */
    async templateRecipe(input: { os: OsName; version: string; storage?: string }): Promise<{ recipe: string; storage: string }> {
      return { recipe: templateRecipe(config, input.os, input.version), storage: storageOf(input.storage) };
    },

    /**
     * The current template of the install's OS version on its storage, or why there is none:
     * none built, only stale ones (another recipe, or older than TEMPLATE_MAX_AGE), or one on
     * a node this worker does not reach. Linked where the storage allows it (pve-storage's
     * `clone` feature of a base volume), full otherwise.
     */
    async findTemplate(input: { os: OsName; version: string; storage?: string; diskGb: number }): Promise<TemplateChoice> {
      const target = { os: input.os, version: input.version, ...(input.storage !== undefined ? { storage: input.storage } : {}) };
      const mine = (await readTemplates(config, proxmox)).filter((t) => templateIsFor(t, target, config.storage));
      const current = mine.find((t) => t.state === 'current');
      if (!current) {
        const what = `${input.os} ${input.version} on storage ${storageOf(input.storage)}`;
        if (mine.length === 0) return { reason: `no template of ${what}`, none: true };
        return { reason: `the template of ${what} is stale (built ${mine[0].builtAt}, by another recipe or more than TEMPLATE_MAX_AGE ago)` };
      }
      const node = proxmox.node(current.node);
      if (!node) return { reason: `the template ${current.vmid} is on node ${current.node}, which this worker does not reach` };
      const conf = await node.config(current.vmid);
      const boot = conf.disks.find((d) => d.key === 'scsi0');
      if (!boot) return { reason: `the template ${current.vmid} has no scsi0 disk` };
      const diskGb = Math.ceil((boot.sizeBytes ?? 0) / 1024 ** 3);
      if (input.diskGb < diskGb) return { reason: `the template's disk is ${diskGb} GiB, more than the ${input.diskGb} GiB asked for` };
      const [storage] = await node.storageStatus({ storage: current.storage });
      const format = boot.options.format ?? (/\.(qcow2|raw|vmdk)$/.exec(boot.volid)?.[1] ?? 'raw');
      return {
        vmid: current.vmid,
        name: current.name ?? `VM ${current.vmid}`,
        node: current.node,
        storage: current.storage,
        builtAt: current.builtAt,
        linked: storage !== undefined && linkedCloneSupported(storage.type, format),
        diskGb,
      };
    },

    /**
     * `qm clone` of the template as the install's VM, holding one of the storage's clone slots
     * (CLONE_CONCURRENCY, workflows/storageSlots.ts) so that parallel clones do not time out
     * on Proxmox's storage lock; a lock timeout that happens anyway is a retryable failure.
     * The clone gets the install's name, its sealed markers and hardware; what cloud-init and
     * the disks need is configureVm's, as for an image install. Finding this run's clone
     * already there (a retry after a crash) counts as done.
     */
    async cloneVm(input: Parameters<Activities['cloneVm']>[0]): Promise<{ ip: string; node: string }> {
      const { vmid, template } = input;
      const spec = checkedInput(installSpecSchema, input.spec, 'cloneVm');
      // qm clone takes no smbios1 and gives the clone a fresh uuid: the markers name it once it is read, below.
      const identity = { vmid, spec, owner: input.owner, ...(input.address ? { address: input.address } : {}) };
      const { run, ip, description } = await newVmIdentity(config, proxmox, 'cloneVm', { ...identity, instance: PENDING_INSTANCE });
      const node = proxmox.requireNode(template.node);
      try {
        await withStorageSlot(deps, { node: template.node, storage: template.storage, holder: `${input.owner}/${run}` }, () =>
          node.cloneVm(template.vmid, vmid, {
            name: input.name,
            description,
            // A linked clone stays on the template's storage; a full one goes where the install asked.
            ...(template.linked ? {} : { full: true, storage: storageOf(spec.storage) }),
            ...(spec.pool !== undefined ? { pool: spec.pool } : {}),
            signal: Context.current().cancellationSignal,
          }),
        );
      } catch (err) {
        if (!(err instanceof VmidTakenError)) throw err;
        if (!(await isThisRunsVm(config, proxmox, vmid, input.owner, run))) throw failure('VmidTakenError', err.message);
      }
      // The markers sealed again for the clone's own uuid: until then they put it in no managed set.
      const instance = vmInstanceOf(await node.config(vmid));
      if (instance === undefined) throw failure('VmInstanceError', `the clone ${vmid} of template ${template.vmid} has no SMBIOS uuid (smbios1)`);
      const markers = { instance, owner: input.owner, run, spec: specMarkerValue(spec) };
      const sealed = installedDescription(markers, markerSealFor(config).seal({ vmid, ...markers }), spec.description);
      // qm clone copies the template's `protection` (qemu-server clone_vm copies every option
      // but a few): the install's VM is its owner's to destroy, not guarded as its template is.
      await node.setVmOptions(vmid, { ...hardwareOptions(config, spec, input.cpuType, input.address), description: sealed, delete: 'protection' });
      return { ip, node: template.node };
    },

    /**
     * Turns the built VM into the template: its markers sealed again with the template marker,
     * the cloud-init drive removed (each clone gets its own, on the drive its machine type
     * needs), then `qm template`. Done only when every disk is a base volume: Proxmox writes
     * `template: 1` before it converts the disks, and `qm template` exits 0 when the
     * conversion fails, so neither says it worked. A conversion that failed fails the
     * attempt with what Proxmox said (a storage lock's timeout: retryable); the retry finds
     * `template: 1` and converts the disks left, one by one (`qm template --disk`, which a
     * template allows). Until then readTemplates does not count the VM as a template.
     */
    async convertToTemplate(input: { vmid: number; owner: string; spec: InstallSpec; marker: TemplateMarker }): Promise<void> {
      const { vmid } = input;
      const spec = checkedInput(installSpecSchema, input.spec, 'convertToTemplate');
      const run = Context.current().info.workflowExecution?.runId;
      if (!run) throw failure('ConfigError', 'convertToTemplate runs for a workflow only');
      const signal = Context.current().cancellationSignal;
      const node = await proxmox.nodeOf(vmid);
      const conf = await node.config(vmid);
      // The config just read answers it: isThisRunsVm would locate the VM and read it again.
      if (!sealedForRun(config, conf, vmid, input.owner, run)) {
        throw failure('NotManagedError', `VM ${vmid} is not the one this template build created`);
      }
      if (conf.entries.template !== '1') {
        const instance = vmInstanceOf(conf);
        if (instance === undefined) throw failure('VmInstanceError', `VM ${vmid} has no SMBIOS uuid (smbios1): its template markers could not name it`);
        const markers = { instance, owner: input.owner, run, spec: specMarkerValue(spec), template: templateMarkerValue(input.marker) };
        await node.setVmOptions(vmid, { description: installedDescription(markers, markerSealFor(config).seal({ vmid, ...markers }), spec.description) });
        const cloudinit = cloudinitDriveKey(spec);
        if (conf.disks.some((d) => d.key === cloudinit)) await node.setVmOptions(vmid, { delete: cloudinit });
        await node.convertToTemplate(vmid, { signal });
      } else {
        for (const disk of await unconvertedDisks(node, vmid, conf)) {
          Context.current().heartbeat();
          await node.convertToTemplate(vmid, { disk: disk.key, signal });
        }
      }
      const after = await node.config(vmid);
      const left = after.entries.template === '1' ? await unconvertedDisks(node, vmid, after) : after.disks;
      if (after.entries.template !== '1' || left.length > 0) {
        const what = after.entries.template !== '1' ? 'without `template: 1`' : `with disks that are no base volumes: ${describeDisks(left)}`;
        throw failure('ProxmoxCommandError', `the conversion of VM ${vmid} into a template ended ${what}`);
      }
      // Proxmox's own guard on what clones depend on: `qm destroy` and the removal of a disk
      // fail while it is set, whoever asks. retireTemplates clears it.
      if (after.entries.protection !== '1') await node.setVmOptions(vmid, { protection: true });
    },

    /**
     * Removes this target's templates older than `keep`, clearing the protection its build
     * set. A template that linked clones still use cannot go (Proxmox refuses: `base volume …
     * is still in use by linked cloned`): it is kept, and the next build tries again.
     */
    async retireTemplates(input: { os: OsName; version: string; storage?: string; keep: number }): Promise<{ retired: number[]; kept: number[] }> {
      const target = { os: input.os, version: input.version, ...(input.storage !== undefined ? { storage: input.storage } : {}) };
      const old = (await readTemplates(config, proxmox)).filter((t) => templateIsFor(t, target, config.storage) && t.vmid !== input.keep);
      const retired: number[] = [];
      const kept: number[] = [];
      for (const t of old) {
        Context.current().heartbeat();
        try {
          const node = proxmox.requireNode(t.node);
          // Linked clones hold the template whether protected or not: Proxmox refuses the
          // destroy then, and the template is kept, protected again for the next build.
          await node.setVmOptions(t.vmid, { delete: 'protection' });
          await node.destroy(t.vmid, { purge: true }).catch(async (err: unknown) => {
            await node.setVmOptions(t.vmid, { protection: true }).catch(() => undefined);
            throw err;
          });
          retired.push(t.vmid);
        } catch (err) {
          if (!/still in use by linked clone/.test(err instanceof Error ? err.message : String(err))) throw err;
          kept.push(t.vmid);
        }
      }
      return { retired, kept };
    },
  };
}
