import { Context } from '@temporalio/activity';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { StorageError } from '../lib/proxmox/errors';
import { meetsLevel } from '../lib/proxmox/cpu';
import { cpuBaseline } from '../lib/vm/cpuBaseline';
import { diskTooBig } from '../lib/vm/diskSpace';
import { IMPORTABLE_STORAGE, storageProblem } from '../lib/vm/placement';
import { portAnswers, vmIp } from '../lib/network';
import { failure, type OsName } from '../contract';

export interface ClusterDeps {
  config: Config;
  proxmox: ProxmoxCluster;
}


/** Rocky 10 / RHEL 10 are built for x86-64-v3 and do not boot below it. */
const MIN_CPU_LEVEL: Partial<Record<OsName, Record<string, string>>> = {
  rockylinux: { '10': 'x86-64-v3' },
};

/** Activities that ask the cluster before an install builds anything: its storage, its CPU baseline, a free VMID. */
export function clusterActivities({ config, proxmox }: ClusterDeps) {
  const main = () => proxmox.main();

  const sshAnswers = (ip: string) => portAnswers(ip, config.vmSshPort);

  return {
    /** The storage exists, can hold disks, is active, and (given a size) has room for the disk. */
    async checkStorage(input: { diskGb?: number; storage?: string } = {}): Promise<void> {
      // The install's own storage: checked as the API checks it.
      if (input.storage !== undefined) {
        const problem = await storageProblem(main(), input.storage, input.diskGb);
        if (problem) throw failure('StorageError', problem);
        return;
      }
      // One storage asked for: the only form every Proxmox interface answers alike.
      const storages = await main()
        .storageStatus({ storage: config.storage })
        .catch((err: unknown) => {
          if (err instanceof StorageError) return [];
          throw err;
        });
      const s = storages.find((x) => x.name === config.storage);
      if (!s) throw failure('StorageError', `storage '${config.storage}' does not exist`);
      if (!IMPORTABLE_STORAGE.includes(s.type)) {
        throw failure(
          'StorageError',
          `storage '${config.storage}' has type ${s.type}; disks need one of ${IMPORTABLE_STORAGE.join(', ')}`,
        );
      }
      if (s.status !== 'active') {
        throw failure('StorageError', `storage '${config.storage}' is ${s.status}, not active`);
      }
      const tooBig = input.diskGb === undefined ? undefined : diskTooBig(input.diskGb, s);
      if (tooBig) throw failure('StorageError', tooBig);
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
        throw failure(
          'CpuLevelError',
          `${input.os} ${input.version} needs a ${needed} CPU, but the cluster baseline is ${cpuType}`,
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
        // With address pools a VM's address is no function of its VMID: createVm checks the leased one.
        if (config.addressPools.length > 0 || !(await sshAnswers(vmIp(config.gateway, id)))) return id;
      }
      throw failure('NoFreeVmidError', `no free VMID in ${start}..${end}`);
    },
  };
}
