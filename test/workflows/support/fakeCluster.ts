import { ApplicationFailure, Context } from '@temporalio/activity';
import { verdict, type Activities, type InstallSpec, type OwnerState, type RebootNeed, type TemplateMarker } from '../../../contract';
import { VmidTakenError } from '../../../lib/proxmox/errors';

/** What a fake guest agent reports as the host key (an ed25519 `.pub` line of no real key). */
const FAKE_HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeHostKeyOfAFakeGuestFakeHostKeyOfAFake';

export interface FakeVm {
  vmid: number;
  name: string;
  /** Workflow id in the VM's owner marker; anything else for a VM QemuRun did not create. */
  owner: string;
  node: string;
  status: 'running' | 'stopped';
  /** The spec marker a rebuild reads; absent on a VM made by hand. */
  spec?: InstallSpec;
  /** false: the description has no qemurun-owner marker at all (the reconciler ignores it). */
  marked?: boolean;
  /** Seconds since Proxmox created it (default 0); the namespace's retention here is one day. */
  ageSec?: number;
  /** A template's marker (convertToTemplate); absent: a VM. */
  template?: TemplateMarker;
  /** A linked clone's template. */
  cloneOf?: number;
}

export interface Call {
  activity: keyof Activities;
  input: unknown;
}

/**
 * A Proxmox cluster kept in a Map, as far as the workflows' decisions depend on it: which
 * VMIDs exist, who owns them, where they are and whether they run. Its activities behave like
 * the real ones at that level (qm create refuses a taken VMID with VmidTakenError, cleanup
 * removes only a VM carrying its owner) and log every call in order.
 */
export class FakeCluster {
  readonly vms = new Map<number, FakeVm>();
  readonly calls: Call[] = [];
  /** How each owner workflow stands, as the reconciler reads it; unlisted: unknown to the namespace. */
  readonly owners = new Map<string, OwnerState>();

  /** What a full init script run finds: by default a new kernel, so the image path reboots. */
  rebootNeed: RebootNeed = { required: true, why: 'kernel 6.1.0-99-amd64 is installed, 6.1.0-27-amd64 is running' };

  constructor(readonly mainNode = 'pve1') {}

  add(vm: Partial<FakeVm> & { vmid: number; owner: string }): FakeVm {
    const full: FakeVm = { name: `vm-${vm.vmid}`, node: this.mainNode, status: 'running', ...vm };
    this.vms.set(vm.vmid, full);
    return full;
  }

  /** The inputs of every call to one activity, in order. */
  inputs<K extends keyof Activities>(activity: K): Array<Parameters<Activities[K]>[0]> {
    return this.calls.filter((c) => c.activity === activity).map((c) => c.input as Parameters<Activities[K]>[0]);
  }

  /** The activities called, in order. */
  sequence(): Array<keyof Activities> {
    return this.calls.map((c) => c.activity);
  }

  /** Resolves once `activity` has been called (polls the log; bounded by the test's timeout). */
  async called(activity: keyof Activities): Promise<void> {
    while (!this.calls.some((c) => c.activity === activity)) await new Promise((r) => setTimeout(r, 20));
  }

  /** Every activity of the product, with `overrides` replacing some; each call is logged. */
  activities(overrides: Partial<Activities> = {}): Activities {
    const all = { ...this.plain(), ...overrides } as Activities;
    const logged: Record<string, unknown> = {};
    for (const [name, fn] of Object.entries(all) as Array<[keyof Activities, (input: unknown) => Promise<unknown>]>) {
      logged[name] = (input: unknown) => {
        this.calls.push({ activity: name, input });
        return fn(input);
      };
    }
    return logged as unknown as Activities;
  }

  /** The same activities without the log, for an override that builds on one of them. */
  plain(): Activities {
    const vms = this.vms;
    const owners = this.owners;
    const mainNode = this.mainNode;
    const rebootNeed = () => this.rebootNeed;
    const get = (vmid: number) => vms.get(vmid);
    /** A DHCP guest's lease is outside the formula's /24; a static guest reports its address. */
    const agentAddress = (vmid: number): { ip?: string; reason?: string } => {
      const vm = get(vmid);
      if (vm?.status !== 'running') return { reason: 'QEMU guest agent is not running' };
      return { ip: vm.spec?.ip === 'dhcp' ? `10.20.0.${vmid % 250}` : `10.10.0.${vmid % 250}` };
    };
    return {
      async checkStorage() {},
      async clusterCpuType() {
        return 'x86-64-v2-AES';
      },
      async downloadImage({ os, version }) {
        return { path: `/cache/${os}-${version}.qcow2`, sha: 'f'.repeat(64), downloaded: false };
      },
      async stageImage({ path }) {
        return `/var/lib/vz/import/${path.split('/').pop()}`;
      },
      async servicePublicKey() {
        return 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMainNodeKey root@pve1';
      },
      async allocateAddress({ pool, vmid }) {
        // One address a VMID in a loopback pool: enough for workflows that only pass it on.
        const address = `127.9.${Math.floor((vmid ?? 0) / 256)}.${(vmid ?? 0) % 256}`;
        return { pool, address, ipconfig: `ip=${address}/16,gw=127.9.0.1` };
      },
      async releaseAddress() {
        return [];
      },
      async releaseLease() {
        return [];
      },
      async leaseBuildAddress() {
        return null;
      },
      async allocateVmid({ exclude }) {
        let vmid = 120;
        while (vms.has(vmid) || exclude.includes(vmid)) vmid++;
        return vmid;
      },
      async createVm({ vmid, name, spec, owner }) {
        if (vms.has(vmid)) {
          const node = get(vmid)!.node;
          throw new VmidTakenError({ command: 'qm create', node: mainNode, exitCode: 255, stderr: `VM ${vmid} already exists on node '${node}'` });
        }
        vms.set(vmid, { vmid, name, owner, node: mainNode, status: 'stopped', spec });
        return { ip: spec.ip === 'dhcp' ? 'dhcp' : `10.10.0.${vmid % 250}`, node: mainNode };
      },
      async templateRecipe({ storage }) {
        return { recipe: 'recipe-1', storage: storage ?? 'local-lvm' };
      },
      async findTemplate({ os, version, storage }) {
        const t = [...vms.values()].reverse().find((v) => v.template?.os === os && v.template.version === version && v.template.storage === (storage ?? 'local-lvm'));
        if (!t?.template) return { reason: `no template of ${os} ${version}`, none: true };
        return { vmid: t.vmid, name: t.name, node: t.node, storage: t.template.storage, builtAt: t.template.builtAt, linked: true, diskGb: 16 };
      },
      async cloneVm({ template, vmid, name, spec, owner }) {
        if (vms.has(vmid)) {
          throw new VmidTakenError({ command: 'qm clone', node: mainNode, exitCode: 255, stderr: `unable to create VM ${vmid}: config file already exists` });
        }
        vms.set(vmid, { vmid, name, owner, node: template.node, status: 'stopped', spec, cloneOf: template.vmid });
        return { ip: spec.ip === 'dhcp' ? 'dhcp' : `10.10.0.${vmid % 250}`, node: template.node };
      },
      async convertToTemplate({ vmid, marker }) {
        const vm = get(vmid)!;
        vm.status = 'stopped';
        vm.template = marker;
      },
      async retireTemplates({ os, version, keep }) {
        const retired: number[] = [];
        const kept: number[] = [];
        for (const t of [...vms.values()].filter((v) => v.template?.os === os && v.template.version === version && v.vmid !== keep)) {
          if ([...vms.values()].some((v) => v.cloneOf === t.vmid)) kept.push(t.vmid);
          else {
            vms.delete(t.vmid);
            retired.push(t.vmid);
          }
        }
        return { retired, kept };
      },
      async importDisk({ vmid }) {
        return `local:${vmid}/vm-${vmid}-disk-0.raw`;
      },
      async configureVm() {},
      async migrateVm({ vmid, target }) {
        get(vmid)!.node = target;
      },
      async startVm({ vmid }) {
        get(vmid)!.status = 'running';
      },
      async rebootVm() {},
      /** No key to pin (as runs from before pinning), unless the install asks for the agent's address with it. */
      async waitForSsh({ vmid, askAddress }) {
        if (!askAddress || vmid === undefined) return undefined;
        return { hostKey: FAKE_HOST_KEY, source: 'guest agent' as const, fingerprint: 'SHA256:fake', address: agentAddress(vmid) };
      },
      async waitForCloudInit() {},
      async runInitScript({ phase }) {
        return phase === undefined ? { reboot: rebootNeed() } : {};
      },
      async readGuestAddress({ vmid }) {
        return agentAddress(vmid);
      },
      async destroyOwnedVm({ vmid, owner }) {
        if (get(vmid)?.owner !== owner) return false;
        vms.delete(vmid);
        return true;
      },
      async shutdownVm({ vmid }) {
        get(vmid)!.status = 'stopped';
      },
      async stopVm({ vmid }) {
        get(vmid)!.status = 'stopped';
      },
      async destroyVm({ vmid }) {
        vms.delete(vmid);
      },
      async setCpu() {},
      async setMemory() {},
      async diskSize() {
        return 10 * 1024 ** 3;
      },
      async growDisk() {},
      async inspectRebuildTarget({ vmid, spec }) {
        const vm = get(vmid);
        if (!vm) {
          if (spec) return { exists: false, vmid, spec: { ...spec, vmid }, mainNode };
          throw ApplicationFailure.nonRetryable(`VM ${vmid} does not exist`, 'VmNotFoundError');
        }
        const recorded = spec ?? vm.spec;
        if (!recorded) {
          throw ApplicationFailure.nonRetryable(`VM ${vmid} was not installed by QemuRun`, 'NotOwnedError');
        }
        return { exists: true, vmid, node: vm.node, owner: vm.owner, spec: { ...recorded, vmid }, status: vm.status, mainNode };
      },
      async stopOwnedVm({ vmid, owner }) {
        const vm = get(vmid);
        if (!vm) return false;
        if (vm.owner !== owner) throw ApplicationFailure.nonRetryable(`VM ${vmid} is no longer owned by ${owner}`, 'NotOwnedError');
        if (vm.status === 'stopped') return false;
        vm.status = 'stopped';
        return true;
      },
      async keptCiPassword() {
        return {};
      },
      async adoptVm({ vmid, owner }) {
        const vm = get(vmid);
        if (vm) vm.owner = owner;
      },
      async initRootPassword() {
        return {};
      },
      async runningVmOperation() {
        return undefined;
      },
      async relayProgress() {
        return 0;
      },
      async planLeaseRelease() {
        return [];
      },
      async planReconcile() {
        const now = Math.floor(Date.now() / 1000);
        return [...vms.values()]
          .sort((a, b) => a.vmid - b.vmid)
          .map((vm) => {
            const owner = vm.marked === false ? undefined : vm.owner;
            const ownerState = owner === undefined ? undefined : (owners.get(owner) ?? 'UNKNOWN_TO_NAMESPACE');
            const facts = { vmid: vm.vmid, node: vm.node, name: vm.name, owner, ownerState, createdAtSec: now - (vm.ageSec ?? 0), retentionSec: 86400, disabled: false };
            return { vmid: vm.vmid, node: vm.node, name: vm.name, ...(owner ? { owner, ownerState } : {}), ...verdict(facts, now) };
          });
      },
    };
  }
}

/** An activity that runs until its workflow cancels it (heartbeating, so it hears of it). */
export async function untilCancelled(): Promise<never> {
  const ctx = Context.current();
  for (;;) {
    ctx.heartbeat();
    await ctx.sleep(50);
  }
}
