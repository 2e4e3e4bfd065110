import crypto from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { VmidTakenError } from '../lib/proxmox/errors';
import {
  adoptedDescription,
  failure,
  installSecretsSchema,
  type InstallSpec,
  installedDescription,
  installSpecSchema,
  ownerOf,
  proxmoxTags,
  specMarkerValue,
  withoutMarkers,
  type PoolAddress,
  type MarkerFields,
  workflowInputs,
  checkedInput,
} from '../contract';
import { markerSealFor, type SealedVm } from '../lib/vm/markerSeal';
import { readAdminKeys } from '../lib/stateFiles';
import { portAnswers, vmIp } from '../lib/network';
import { managedNodeOf, requireInstance, requireManaged } from './managedSet';
import { vmInstanceOf } from '../lib/proxmox/vmInstance';
import { applyUserSnippet, removeUserSnippet } from './userSnippet';

export interface VmDeps {
  config: Config;
  proxmox: ProxmoxCluster;
}

/**
 * Where the cloud-init drive goes. On `q35` Proxmox attaches `ide2` to the ICH9 AHCI
 * controller. The generic images QemuRun downloads (linux-image-amd64) and Debian 13's cloud
 * kernel drive it, but Debian 12's genericcloud kernel (linux-image-cloud-amd64, 6.1:
 * `# CONFIG_SATA_AHCI is not set`) has no driver for it: a guest whose image carries that
 * kernel (a template or a custom image built from a genericcloud one) never reads its NoCloud
 * drive, keeps the name `localhost` and never gets its keys. The SCSI controller the boot
 * disk is on works with every kernel and machine type, so on q35 the drive is `scsi30`, the
 * last SCSI slot, clear of the data disks (`scsi1`..). On `pc` it stays `ide2` (PIIX, which
 * every Debian kernel has), as the seed made it.
 */
export function cloudinitDriveKey(spec: Pick<InstallSpec, 'machine'>): 'ide2' | 'scsi30' {
  return spec.machine === 'q35' ? 'scsi30' : 'ide2';
}

/**
 * The drives an install adds after its boot disk and cloud-init drive, in order,
 * as `qm set` options with Proxmox's new-disk syntax `<storage>:<GiB>` (qemu-server Drive.pm
 * `$NEW_DISK_RE`): the EFI disk when the firmware is OVMF, then the extra data disks as
 * scsi1, scsi2, …. configureVm sets only those the VM lacks, so a retry creates none twice.
 * The EFI disk's size is Proxmox's (the "1" is ignored: it copies the 4m vars template);
 * `pre-enrolled-keys=0`: no Secure Boot keys, so the firmware boots any EFI loader (Debian's
 * shim and GRUB included) and nothing depends on Microsoft's certificates being current.
 */
export function extraDriveOptions(spec: InstallSpec, assignStorage: string): Array<[string, string]> {
  const storage = spec.storage ?? assignStorage;
  return [
    ...(spec.bios === 'ovmf' ? [['efidisk0', `${storage}:1,efitype=4m,pre-enrolled-keys=0`] as [string, string]] : []),
    ...(spec.disks ?? []).map((d, i): [string, string] => [`scsi${i + 1}`, `${d.storage ?? storage}:${d.sizeGb}`]),
  ];
}

/**
 * Activities that create a VM, set its options, take it into the managed set and destroy
 * it. Each finds the node the VM lives on now and is safe to run twice: a retry after a
 * lost completion finds the goal reached and does nothing more.
 */
export function vmActivities({ config, proxmox }: VmDeps) {
  const main = () => proxmox.main();
  const managedNode = (vmid: number, instance?: string) => managedNodeOf(config, proxmox, vmid, undefined, instance);
  /**
   * Whether the VM's markers are sealed and name this owner (and, when given, this run of it).
   * A run's own clone whose uuid it had not sealed yet is its own to clean up.
   */
  const sealedFor = (conf: SealedVm, vmid: number, owner: string, run?: string) => {
    const check = markerSealFor(config).check(conf, vmid, { acceptPending: run !== undefined });
    return check.sealed && check.fields.owner === owner && (run === undefined || check.fields.run === run);
  };

  /**
   * Where a VM's snippet may be: its node and the main node (an install writes it there and
   * copies it along a migration), when this worker reaches them.
   */
  const snippetNodes = (node: string) => [...new Set([node, proxmox.mainNode])].filter((n) => proxmox.node(n) !== undefined);

  return {
    /**
     * Creates the VM on the main node (this worker's MAIN_NODE, which the result names for the
     * workflow), its description the sealed owner and spec markers of this run; finding this
     * very run's VM already there counts as done. The VM's address must be free first,
     * whether the VMID was allocated or asked for: a machine already answering SSH there
     * would receive what is meant for the new VM. A DHCP install's `ip` is `dhcp`: its
     * address is the DHCP server's to give, and the guest agent's to report after start.
     */
    async createVm(input: { vmid: number; name: string; spec: InstallSpec; cpuType: string; owner: string; address?: PoolAddress }): Promise<{ ip: string; node: string }> {
      const { vmid } = input;
      const spec = checkedInput(installSpecSchema, input.spec, 'createVm');
      // QemuRun chooses the VM's SMBIOS uuid, so the markers written with the VM already name it.
      const instance = crypto.randomUUID();
      const { run, ip, description } = await newVmIdentity(config, proxmox, 'createVm', { ...input, spec, instance });
      try {
        const { cores, cpu, memory, net0, numa, balloon, machine, bios } = hardwareOptions(config, spec, input.cpuType, input.address);
        // In the seed's order, which the sandbox's call log and the tests read.
        await main().createVm(vmid, {
          name: input.name,
          cores,
          cpu,
          scsihw: 'virtio-scsi-pci',
          memory,
          ostype: 'l26',
          agent: '1',
          net0,
          serial0: 'socket',
          description,
          smbios1: `uuid=${instance}`,
          ...(balloon ? { numa, balloon } : {}),
          // Proxmox refuses a pool that does not exist (403, PermissionDeniedError: not retried).
          ...(spec.pool !== undefined ? { pool: spec.pool } : {}),
          ...(machine !== undefined ? { machine } : {}),
          ...(bios !== undefined ? { bios } : {}),
        });
      } catch (err) {
        if (err instanceof VmidTakenError) {
          // A retry after a crash finds the VM this very run created.
          if (await isThisRunsVm(config, proxmox, vmid, input.owner, run)) return { ip, node: (await proxmox.locateVm(vmid))!.node };
          throw failure('VmidTakenError', err.message);
        }
        throw err;
      }
      return { ip, node: proxmox.mainNode };
    },

    /**
     * Cloud-init, disks, boot order and network in one `qm set` (one `PUT .../config`), then
     * the boot disk's resize: every option absolute, and each disk only when the VM lacks it,
     * so a retry creates none twice. One call does what separate ones did: qemu-server's
     * update_vm_api applies each option in turn under the one config lock, allocating new
     * disks as it goes, and takes a boot order naming a disk of the same call
     * (`$conf->{$dev} || $conf->{pending}->{$dev} || $param->{$dev}`).
     */
    async configureVm(input: {
      vmid: number;
      volid?: string;
      spec: InstallSpec;
      ip: string;
      ipconfig?: string;
      mainKey: string;
      /** Neither: the user gets no usable password (login with the injected keys only). */
      passwd?: string;
      passwdHash?: string;
      /** The request's cloud-init user-data: written as the VM's user snippet (absent in inputs of earlier versions). */
      userData?: string;
    }): Promise<void> {
      const { vmid } = input;
      const spec = checkedInput(installSpecSchema, input.spec, 'configureVm');
      const { passwd, passwdHash, userData } = checkedInput(
        installSecretsSchema,
        { passwd: input.passwd, passwdHash: input.passwdHash, userData: input.userData },
        'configureVm',
      );
      const node = main();
      const keys = [input.mainKey, ...readAdminKeys(config.dataDir), ...(spec.pubkey ? spec.pubkey.split('\n') : [])];
      const conf = await node.config(vmid);
      const lacks = (key: string) => !conf.disks.some((d) => d.key === key);
      if (lacks('scsi0') && input.volid === undefined) throw failure('ConfigError', `VM ${vmid} has no boot disk (scsi0) and none was imported`);
      const drives: Array<[string, string]> = [
        ...(input.volid !== undefined ? [['scsi0', input.volid] as [string, string]] : []),
        [cloudinitDriveKey(spec), `${spec.storage ?? config.storage}:cloudinit`],
        ...extraDriveOptions(spec, config.storage),
      ];
      const options = {
        sshkeys: `${keys.join('\n')}\n`,
        ...(passwd !== undefined ? { cipassword: passwd } : passwdHash !== undefined ? { cipasswordHash: passwdHash } : {}),
        ciuser: spec.user,
        ciupgrade: 0,
        tags: proxmoxTags([spec.os, ...(spec.tags ?? [])]),
        ...Object.fromEntries(drives.filter(([key]) => lacks(key))),
        boot: 'order=scsi0',
        ipconfig0: input.ipconfig ?? ipconfig0Of(spec, input.ip, config.gateway),
        ...dnsOptionsOf(spec),
      };
      // With `cicustom user=` Proxmox writes the snippet instead of the user-data it would generate from the options.
      if (userData !== undefined) {
        await applyUserSnippet(config, node, { vmid, spec, userData, keys, passwd, passwdHash, hostname: conf.name ?? `VM${vmid}` }, options);
      } else {
        await node.setVmOptions(vmid, options);
      }
      // Absolute, so a retry is harmless; never below the image (Proxmox refuses to shrink).
      // A boot disk attached just now has its size in the config only from now on.
      const scsi0 = (lacks('scsi0') ? await node.config(vmid) : conf).disks.find((d) => d.key === 'scsi0');
      if (!scsi0?.sizeBytes || scsi0.sizeBytes < spec.diskGb * 1024 ** 3) await node.resize(vmid, 'scsi0', `${spec.diskGb}G`);
    },

    async setCpu(input: { vmid: number; cores: number; instance?: string }): Promise<void> {
      checkedInput(workflowInputs.setCpu, input, 'setCpu');
      await (await managedNode(input.vmid, input.instance)).setVmOptions(input.vmid, { cores: input.cores });
    },

    /**
     * Memory with the install's balloon rule (VM_BALLOON_MIN): `--numa 1 --balloon
     * RAM-min` when it applies. When it does not, a balloon target left from before is
     * removed first, since Proxmox refuses a balloon larger than the memory.
     */
    async setMemory(input: { vmid: number; memoryMb: number; instance?: string }): Promise<void> {
      checkedInput(workflowInputs.setMemory, input, 'setMemory');
      const node = await managedNode(input.vmid, input.instance);
      const balloon = balloonFor(input.memoryMb, config.balloonMinMb);
      if (balloon !== undefined) {
        await node.setVmOptions(input.vmid, { memory: input.memoryMb, numa: 1, balloon });
        return;
      }
      const conf = await node.config(input.vmid);
      if (conf.entries.balloon !== undefined) await node.setVmOptions(input.vmid, { delete: 'balloon' });
      await node.setVmOptions(input.vmid, { memory: input.memoryMb });
    },

    /**
     * Takes a VM into the managed set: appends the owner marker and a dated note, sealed, to
     * its description (what the operator wrote there is kept). Done already by this adoption
     * (a retry) is done; a VM whose markers are sealed already is refused, its owner left as
     * it is. Markers without a valid seal (forged, or from before sealing) are replaced.
     */
    async adoptVm(input: { vmid: number; owner: string; at: string; workflowId: string; runId: string; by?: string; tenant?: string; instance?: string }): Promise<void> {
      const node = await proxmox.nodeOf(input.vmid);
      const conf = await node.config(input.vmid);
      requireInstance(input.vmid, conf, input.instance);
      const check = markerSealFor(config).check(conf, input.vmid);
      if (check.sealed && check.fields.owner === input.owner) return;
      if (check.sealed) {
        throw failure('AlreadyManagedError', `VM ${input.vmid} is already managed by QemuRun (qemurun-owner=${check.fields.owner})`);
      }
      // The seal names the instance: without a uuid the VM could not be told from a later one at its VMID.
      const instance = vmInstanceOf(conf);
      if (instance === undefined) {
        throw failure('VmInstanceError', `VM ${input.vmid} has no SMBIOS uuid (smbios1), so its markers cannot be bound to it; give it one in Proxmox (qm set ${input.vmid} --smbios1 uuid=$(uuidgen))`);
      }
      const seal = (f: MarkerFields) => markerSealFor(config).seal(f);
      await node.setVmOptions(input.vmid, { description: adoptedDescription(withoutMarkers(conf.description), input, seal, { vmid: input.vmid, instance }) });
    },

    /**
     * `qm destroy --purge`. The API checked that the VM exists, so a VM gone on a retry was
     * destroyed by the attempt before. A running VM fails with VmStateError.
     */
    async destroyVm(input: { vmid: number; instance?: string }): Promise<void> {
      const vm = await proxmox.locateVm(input.vmid);
      if (!vm) return;
      const node = proxmox.requireNode(vm.node);
      await requireManaged(config, node, input.vmid, input.instance);
      const cicustom = (await node.config(input.vmid)).entries.cicustom;
      await node.destroy(input.vmid, { purge: true });
      await removeUserSnippet(proxmox, cicustom, input.vmid, snippetNodes(vm.node));
    },

    /**
     * Stops and purges a VM, but only one whose description carries this owner's sealed
     * marker (and this run's, when `run` is given): cleanup never touches a VM the product
     * did not create, nor one whose markers someone wrote by hand. Returns whether a VM
     * was removed.
     */
    async destroyOwnedVm(input: { vmid: number; owner: string; run?: string; instance?: string }): Promise<boolean> {
      const vm = await proxmox.locateVm(input.vmid);
      if (!vm) return false;
      const node = proxmox.requireNode(vm.node);
      const conf = await node.config(input.vmid).catch(() => undefined);
      if (!conf || !sealedFor(conf, input.vmid, input.owner, input.run)) return false;
      // Another VM at the VMID since the rebuild inspected it is not the one to destroy.
      if (input.instance !== undefined && vmInstanceOf(conf) !== input.instance) return false;
      // Ours for sure, so a lock a crashed step of this run left behind is no obstacle.
      if ((await node.status(input.vmid)) !== 'stopped') await node.stop(input.vmid, { skiplock: true });
      await node.destroy(input.vmid, { purge: true, skiplock: true });
      await removeUserSnippet(proxmox, conf.entries.cicustom, input.vmid, snippetNodes(vm.node));
      return true;
    },
  };
}

/**
 * Who a new VM is and where it answers: the VM instance (the SMBIOS uuid it is created with,
 * or PENDING_INSTANCE for a clone, whose uuid Proxmox chooses), the run that creates it (from Temporal, not from the
 * input: a later run under the same workflow id, a reset or one started by hand, is not the
 * owner of what this one built), its address, and its description with the sealed owner and
 * spec markers. The address must be free first, whether the VMID was allocated or asked for:
 * a machine already answering SSH there would receive what is meant for the new VM. A DHCP
 * install's `ip` is `dhcp`: its address is the DHCP server's to give, and the guest agent's to
 * report after start.
 */
export async function newVmIdentity(
  config: Config,
  proxmox: ProxmoxCluster,
  activity: string,
  input: { vmid: number; spec: InstallSpec; owner: string; address?: PoolAddress; instance: string },
): Promise<{ run: string; ip: string; description: string }> {
  const { vmid, spec } = input;
  const run = Context.current().info.workflowExecution?.runId;
  if (!run) throw failure('ConfigError', `${activity} runs for a workflow only: its markers name the run`);
  const markers = { instance: input.instance, owner: input.owner, run, spec: specMarkerValue(spec) };
  const ip = spec.ip === 'dhcp' ? 'dhcp' : (input.address?.address ?? vmIp(config.gateway, vmid));
  // A VM that exists already (this run's, on a retry, or another's) is Proxmox's create to judge.
  if (ip !== 'dhcp' && !(await proxmox.locateVm(vmid)) && (await portAnswers(ip, config.vmSshPort))) {
    throw failure('AddressInUseError', `VM ${vmid}'s address ${ip} already answers SSH on port ${config.vmSshPort}: another machine uses it`);
  }
  return { run, ip, description: installedDescription(markers, markerSealFor(config).seal({ vmid, ...markers }), spec.description) };
}

/** Whether VM `vmid` exists with markers sealed for this run of `owner`: what a create or clone retried after a crash finds. */
export async function isThisRunsVm(config: Config, proxmox: ProxmoxCluster, vmid: number, owner: string, run: string): Promise<boolean> {
  const vm = await proxmox.locateVm(vmid);
  const conf = vm ? await proxmox.requireNode(vm.node).config(vmid).catch(() => undefined) : undefined;
  return conf !== undefined && sealedForRun(config, conf, vmid, owner, run);
}

/**
 * Whether a VM carries markers sealed for this run of `owner`, for its instance or, on a clone
 * this run made, before its uuid was known (the run ids are Temporal's: no other run's markers
 * name this one).
 */
export function sealedForRun(config: Config, conf: SealedVm, vmid: number, owner: string, run: string): boolean {
  const check = markerSealFor(config).check(conf, vmid, { acceptPending: true });
  return check.sealed && check.fields.owner === owner && check.fields.run === run;
}

/**
 * The hardware an install asks for, as `qm create` or, on a clone, `qm set` options: cores
 * and the cluster's CPU type, memory with the balloon rule, net0 on the pool's bridge and VLAN
 * unless the request named its own, and machine and firmware only when asked for, so an
 * older spec creates what it did.
 */
export function hardwareOptions(
  config: Config,
  spec: InstallSpec,
  cpuType: string,
  address?: PoolAddress,
): { cores: number; cpu: string; memory: number; net0: string; numa?: number; balloon?: number; machine?: string; bios?: string } {
  const balloon = balloonFor(spec.ramMb, config.balloonMinMb);
  return {
    cores: spec.cores,
    cpu: cpuType,
    memory: spec.ramMb,
    net0: net0Of({ bridge: address?.bridge, vlan: address?.vlan, ...definedOf(spec) }, config.bridge),
    ...(balloon ? { numa: 1, balloon } : {}),
    ...(spec.machine !== undefined ? { machine: spec.machine } : {}),
    ...(spec.bios !== undefined ? { bios: spec.bios } : {}),
  };
}

/**
 * net0 as the spec asks for it: VirtIO on the spec's bridge (VM_BRIDGE without one), with
 * its VLAN `tag` and `mtu` when given. A spec without them gives the seed's
 * `virtio,bridge=<VM_BRIDGE>`; Proxmox adds the MAC address and sorts the keys.
 */
export function net0Of(spec: Pick<InstallSpec, 'bridge' | 'vlan' | 'mtu'>, defaultBridge: string): string {
  return [`virtio`, `bridge=${spec.bridge ?? defaultBridge}`, ...(spec.mtu !== undefined ? [`mtu=${spec.mtu}`] : []), ...(spec.vlan !== undefined ? [`tag=${spec.vlan}`] : [])].join(',');
}

/** The spec's bridge and VLAN when it names them: an absent one must not hide the pool's. */
function definedOf(spec: Pick<InstallSpec, 'bridge' | 'vlan' | 'mtu'>): Pick<InstallSpec, 'bridge' | 'vlan' | 'mtu'> {
  return Object.fromEntries(Object.entries({ bridge: spec.bridge, vlan: spec.vlan, mtu: spec.mtu }).filter(([, v]) => v !== undefined));
}

/**
 * ipconfig0: the static address in GATEWAY's /24 with its gateway, as the seed set it, or
 * `ip=dhcp` as Proxmox writes DHCP (no gw: qemu-server warns about a gateway with DHCP and
 * leaves the interface without subnets).
 */
export function ipconfig0Of(spec: Pick<InstallSpec, 'ip'>, ip: string, gateway: string): string {
  return spec.ip === 'dhcp' ? 'ip=dhcp' : `ip=${ip}/24,gw=${gateway}`;
}

/**
 * The spec's DNS as Proxmox's cloud-init options: `nameserver` (addresses separated by
 * spaces, as qemu-server's address-list splits them) and `searchdomain`. Neither is set
 * without the spec asking, so the VM keeps taking the node's, as before.
 */
export function dnsOptionsOf(spec: Pick<InstallSpec, 'dns'>): { nameserver?: string; searchdomain?: string } {
  return {
    ...(spec.dns?.servers?.length ? { nameserver: spec.dns.servers.join(' ') } : {}),
    ...(spec.dns?.search !== undefined ? { searchdomain: spec.dns.search } : {}),
  };
}

/** With VM_BALLOON_MIN set and RAM ≥ min + 1024, balloon RAM-min (RAM ≥ 64 GiB: 48 GiB). */
export function balloonFor(ramMb: number, minMb: number | undefined): number | undefined {
  if (!minMb || ramMb < minMb + 1024) return undefined;
  return ramMb >= 65536 ? 49152 : ramMb - minMb;
}
