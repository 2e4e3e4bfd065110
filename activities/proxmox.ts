import net from 'node:net';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { ProxmoxCluster, ProxmoxNode } from '../lib/proxmox';
import { StorageError, VmidTakenError } from '../lib/proxmox/errors';
import { meetsLevel } from '../lib/proxmox/cpu';
import { cpuBaseline } from '../lib/vm/cpuBaseline';
import { diskTooBig } from '../lib/vm/diskSpace';
import {
  field,
  installSecretsSchema,
  type InstallSpec,
  installSpecSchema,
  isOwnedBy,
  type OsName,
  ownerMarker,
  specMarker,
} from '../contract';
import { readAdminKeys } from '../lib/stateFiles';
import { ensureSshKey } from '../lib/sshKey';
import { vmIp } from '../lib/network';
import { outputStream } from './output';
import { keepAlive } from './keepAlive';
import { requireManaged } from './managedSet';
import { checkedInput } from './checkInput';
import { recordedTask } from './tasks';

export interface ProxmoxDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

/** Storage types a cloud image can be imported to: dir, zfspool, lvmthin, nfs. */
const IMPORTABLE_STORAGE = ['dir', 'zfspool', 'lvmthin', 'nfs'];

/** Rocky 10 / RHEL 10 are built for x86-64-v3 and do not boot below it. */
const MIN_CPU_LEVEL: Partial<Record<OsName, Record<string, string>>> = {
  rockylinux: { '10': 'x86-64-v3' },
};

/** Activities that drive Proxmox (qm, pvesh and pvesm on the nodes, or the REST API). */
export function proxmoxActivities({ config, proxmox, client }: ProxmoxDeps) {
  const main = () => proxmox.main();

  /** The node of a VM that exists and is in the managed set (activities/managedSet.ts). */
  async function managedNodeOf(vmid: number): Promise<ProxmoxNode> {
    const node = await proxmox.nodeOf(vmid);
    await requireManaged(config, node, vmid);
    return node;
  }

  async function sshAnswers(ip: string): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = net.connect({ host: ip, port: config.vmSshPort, timeout: 500 });
      const done = (answer: boolean) => {
        socket.destroy();
        resolve(answer);
      };
      socket.once('connect', () => done(true));
      socket.once('timeout', () => done(false));
      socket.once('error', () => done(false));
    });
  }

  return {
    /** The storage exists, can hold disks, is active, and (given a size) has room for the disk. */
    async checkStorage(input: { diskGb?: number } = {}): Promise<void> {
      // One storage asked for: the only form every Proxmox interface answers alike.
      const storages = await main()
        .storageStatus({ storage: config.storage })
        .catch((err: unknown) => {
          if (err instanceof StorageError) return [];
          throw err;
        });
      const s = storages.find((x) => x.name === config.storage);
      if (!s) throw ApplicationFailure.nonRetryable(`storage '${config.storage}' does not exist`, 'StorageError');
      if (!IMPORTABLE_STORAGE.includes(s.type)) {
        throw ApplicationFailure.nonRetryable(
          `storage '${config.storage}' has type ${s.type}; disks need one of ${IMPORTABLE_STORAGE.join(', ')}`,
          'StorageError',
        );
      }
      if (s.status !== 'active') {
        throw ApplicationFailure.nonRetryable(`storage '${config.storage}' is ${s.status}, not active`, 'StorageError');
      }
      const tooBig = input.diskGb === undefined ? undefined : diskTooBig(input.diskGb, s);
      if (tooBig) throw ApplicationFailure.nonRetryable(tooBig, 'StorageError');
    },

    /**
     * The CPU type every VM gets: the lowest x86-64 level all nodes support, so a VM can
     * migrate anywhere in the cluster. Cached in the data dir with the online nodes it was
     * detected on, and detected again when those differ (see cpuBaseline).
     */
    async clusterCpuType(input: { os: OsName; version: string; refresh?: boolean }): Promise<string> {
      const { cpuType } = await cpuBaseline(main(), config.dataDir, {
        refresh: input.refresh,
        onFallback: (error) => Context.current().log.warn('CPU baseline detection failed, using kvm64', { error }),
      });
      const needed = MIN_CPU_LEVEL[input.os]?.[input.version];
      if (needed && !meetsLevel(cpuType, needed)) {
        throw ApplicationFailure.nonRetryable(
          `${input.os} ${input.version} needs a ${needed} CPU, but the cluster baseline is ${cpuType}`,
          'CpuLevelError',
        );
      }
      return cpuType;
    },

    /**
     * A free VMID from the configured range: used IDs come from one cluster query, and an
     * ID whose IP already answers SSH (a machine Proxmox does not know) is skipped. The
     * start is randomised so concurrent installs rarely race for the same ID; when they
     * do, `qm create` decides and the loser asks again.
     */
    async allocateVmid(input: { exclude: number[] }): Promise<number> {
      const used = new Set((await proxmox.guests()).map((r) => r.vmid));
      for (const id of input.exclude) used.add(id);
      const { start, end } = config.vmidRange;
      const free: number[] = [];
      for (let id = start; id <= end; id++) if (!used.has(id)) free.push(id);
      const offset = free.length > 0 ? Math.floor(Math.random() * Math.min(free.length, 16)) : 0;
      for (let i = 0; i < free.length; i++) {
        const id = free[(offset + i) % free.length];
        if (!(await sshAnswers(vmIp(config.gateway, id)))) return id;
      }
      throw ApplicationFailure.nonRetryable(`no free VMID in ${start}..${end}`, 'NoFreeVmidError');
    },

    /** `qm create` on the main node; finding our own VM already there counts as done. */
    async qmCreate(input: { vmid: number; name: string; spec: InstallSpec; cpuType: string; owner: string }): Promise<{ ip: string }> {
      const { vmid } = input;
      const spec = checkedInput(installSpecSchema, input.spec, 'qmCreate');
      const balloon = balloonFor(spec.ramMb, config.balloonMinMb);
      try {
        await main().qmCreate(vmid, {
          name: input.name,
          cores: spec.cpu,
          cpu: input.cpuType,
          scsihw: 'virtio-scsi-pci',
          memory: spec.ramMb,
          ostype: 'l26',
          agent: '1',
          net0: `virtio,bridge=${config.bridge}`,
          serial0: 'socket',
          description: `${ownerMarker(input.owner)}\n${specMarker(spec)}`,
          ...(balloon ? { numa: 1, balloon } : {}),
        });
      } catch (err) {
        if (err instanceof VmidTakenError) {
          // A retry after a crash finds the VM this very run created.
          const vm = await proxmox.locateVm(vmid);
          const conf = vm ? await proxmox.requireNode(vm.node).config(vmid).catch(() => undefined) : undefined;
          if (conf && isOwnedBy(conf.description, input.owner)) return { ip: vmIp(config.gateway, vmid) };
          throw ApplicationFailure.nonRetryable(err.message, 'VmidTakenError');
        }
        throw err;
      }
      return { ip: vmIp(config.gateway, vmid) };
    },

    /**
     * Imports the image once: a retry finds the disk already attached or unused, or (API
     * mode) follows the import task the attempt before started.
     */
    async importDisk(input: { vmid: number; imagePath: string }): Promise<string> {
      const node = main();
      const task = recordedTask();
      if (!task.resumeTask) {
        const conf = await node.config(input.vmid);
        const existing = conf.disks.find((d) => d.key === 'scsi0' || d.key.startsWith('unused'));
        if (existing) return existing.volid;
      }
      const out = outputStream(client);
      try {
        return await keepAlive(() =>
          node.importDisk(input.vmid, input.imagePath, config.storage, {
            ...task,
            onProgress: (line) => out.line(line),
            signal: Context.current().cancellationSignal,
          }),
        );
      } finally {
        await out.close();
      }
    },

    /** Cloud-init, disks, boot order and network in the seed's order; every step absolute. */
    async configureVm(input: {
      vmid: number;
      volid: string;
      spec: InstallSpec;
      ip: string;
      mainKey: string;
      /** Neither: the user gets no usable password (login with the injected keys only). */
      passwd?: string;
      passwdHash?: string;
    }): Promise<void> {
      const { vmid } = input;
      const spec = checkedInput(installSpecSchema, input.spec, 'configureVm');
      const { passwd, passwdHash } = checkedInput(installSecretsSchema, { passwd: input.passwd, passwdHash: input.passwdHash }, 'configureVm');
      const node = main();
      const keys = [input.mainKey, ...readAdminKeys(config.dataDir), ...(spec.pubkey ? spec.pubkey.split('\n') : [])];
      const conf = await node.config(vmid);
      await node.qmSet(vmid, {
        sshkeys: `${keys.join('\n')}\n`,
        ...(passwd !== undefined ? { cipassword: passwd } : passwdHash !== undefined ? { cipasswordHash: passwdHash } : {}),
        ciuser: spec.user,
        ciupgrade: 0,
        tags: spec.os,
      });
      if (!conf.disks.some((d) => d.key === 'scsi0')) await node.qmSet(vmid, { scsi0: input.volid });
      if (!conf.disks.some((d) => d.key === 'ide2')) await node.qmSet(vmid, { ide2: `${config.storage}:cloudinit` });
      await node.qmSet(vmid, { boot: 'order=scsi0' });
      // Absolute, so a retry is harmless; never below the image (Proxmox refuses to shrink).
      const scsi0 = (await node.config(vmid)).disks.find((d) => d.key === 'scsi0');
      if (!scsi0?.sizeBytes || scsi0.sizeBytes < spec.diskGb * 1024 ** 3) await node.resize(vmid, 'scsi0', `${spec.diskGb}G`);
      await node.qmSet(vmid, { ipconfig0: `ip=${input.ip}/24,gw=${config.gateway}` });
    },

    /**
     * Migrates to `target`. After a crash the retry finds the VM there already, or (API
     * mode) follows the migration task still running rather than starting another.
     */
    async migrateVm(input: { vmid: number; target: string }): Promise<void> {
      checkedInput(field.node, input.target, 'migrateVm');
      const task = recordedTask();
      const current = await proxmox.locateVm(input.vmid);
      if (current?.node === input.target && !task.resumeTask) return; // done before a crash
      const out = outputStream(client);
      try {
        if (task.resumeTask) out.line(`[*] following the migration task the previous attempt started (${task.resumeTask})`);
        // The task's node is the source, where the VM's config may no longer be.
        const node = task.resumeTask ? main() : await managedNodeOf(input.vmid);
        await keepAlive(() =>
          node.migrate(input.vmid, input.target, {
            ...task,
            withLocalDisks: true,
            onLine: (line) => out.line(line),
            signal: Context.current().cancellationSignal,
          }),
        );
      } finally {
        await out.close();
      }
    },

    async startVm(input: { vmid: number }): Promise<void> {
      const node = await managedNodeOf(input.vmid);
      if ((await node.status(input.vmid)) === 'running') return;
      await node.start(input.vmid);
    },

    async rebootVm(input: { vmid: number }): Promise<void> {
      const node = await managedNodeOf(input.vmid);
      if ((await node.status(input.vmid)) !== 'running') {
        await node.start(input.vmid);
        return;
      }
      await node.reboot(input.vmid);
    },

    /**
     * Stops and purges a VM, but only one whose description carries this owner's
     * marker: cleanup never touches a VM the product did not create. Returns whether a VM
     * was removed.
     */
    async destroyOwnedVm(input: { vmid: number; owner: string }): Promise<boolean> {
      const vm = await proxmox.locateVm(input.vmid);
      if (!vm) return false;
      const node = proxmox.requireNode(vm.node);
      const conf = await node.config(input.vmid).catch(() => undefined);
      if (!conf || !isOwnedBy(conf.description, input.owner)) return false;
      // Ours for sure, so a lock a crashed step of this run left behind is no obstacle.
      if ((await node.status(input.vmid)) !== 'stopped') await node.stop(input.vmid, { skiplock: true });
      await node.destroy(input.vmid, { purge: true, skiplock: true });
      return true;
    },

    /** The public key every VM trusts, so the service (and the main node) can log in. */
    async mainNodeKey(): Promise<string> {
      return ensureSshKey(config.sshKeyPath).publicKey;
    },
  };
}

/** With VM_BALLOON_MIN set and RAM ≥ min + 1024, balloon RAM-min (RAM ≥ 64 GiB: 48 GiB). */
export function balloonFor(ramMb: number, minMb: number | undefined): number | undefined {
  if (!minMb || ramMb < minMb + 1024) return undefined;
  return ramMb >= 65536 ? 49152 : ramMb - minMb;
}
