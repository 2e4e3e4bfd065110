import {
  type InstallSpec,
  ownerOf,
  type ProgressEvent,
  progressQuery,
  type RebuildTarget,
  relayedProgressSignal,
  type RunningOperation,
  vmWorkflowId,
} from '../contract';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { inspectVmForRebuild, RebuildRefusal } from '../lib/vm/rebuildTarget';

export interface RebuildDeps {
  config: Config;
  proxmox: ProxmoxCluster;
  client: Client;
}

const RELAY_POLL_MS = 1000;

/** Activities of the rebuild workflow: the check, the stop, and the progress relay. */
export function rebuildActivities({ config, proxmox, client }: RebuildDeps) {
  return {
    /** The workflow's check: inspectVmForRebuild, with a refusal made non-retryable. */
    async inspectRebuildTarget(input: { vmid: number; spec?: InstallSpec }): Promise<RebuildTarget> {
      try {
        return await inspectVmForRebuild({ config, proxmox, client }, input);
      } catch (err) {
        if (err instanceof RebuildRefusal) throw ApplicationFailure.nonRetryable(err.message, err.type);
        throw err;
      }
    },

    /**
     * Force-stops a VM carrying this owner marker (a rebuild throws the guest away, so there is
     * no point in an ACPI shutdown). A lock held by a backup or migration is respected: the
     * stop retries and, failing that, the rebuild stops before destroying anything.
     */
    async stopOwnedVm(input: { vmid: number; owner: string }): Promise<boolean> {
      const found = await proxmox.locateGuest(input.vmid);
      if (!found) return false;
      const node = proxmox.requireNode(found.node);
      const conf = await node.config(input.vmid);
      if (ownerOf(conf.description) !== input.owner) {
        throw ApplicationFailure.nonRetryable(`VM ${input.vmid} is no longer owned by ${input.owner}; refusing to stop it`, 'NotOwnedError');
      }
      if ((await node.status(input.vmid)) === 'stopped') return false;
      await node.stop(input.vmid);
      return true;
    },

    /**
     * The cloud-init password the re-created VM gets when the rebuild names none: the hash
     * the VM has now (`qm cloudinit dump`: qm config shows only stars), so a rebuild never
     * resets a password; with none there, no usable password (or the seed's default, with
     * UNSAFE_DEFAULT_PASSWORDS). Read before the VM is destroyed.
     */
    async keptCiPassword(input: { vmid: number; node?: string }): Promise<{ passwdHash?: string; passwd?: string }> {
      const node = input.node ? proxmox.node(input.node) : undefined;
      const hash = node ? await node.ciPasswordHash(input.vmid) : undefined;
      if (hash) return { passwdHash: hash };
      return config.defaultCiPassword ? { passwd: config.defaultCiPassword } : {};
    },

    /** The root password for the OS init script, read when the rebuild runs (never stored in a schedule). */
    async initRootPassword(): Promise<{ rootPassword?: string }> {
      return config.rootPassword ? { rootPassword: config.rootPassword } : {};
    },

    /** The operation running under `vm-<vmid>`, if any, so a skipped run can say what it waited for. */
    async runningVmOperation(input: { vmid: number }): Promise<RunningOperation | undefined> {
      try {
        const d = await client.workflow.getHandle(vmWorkflowId(input.vmid)).describe();
        if (d.status.name !== 'RUNNING') return undefined;
        return { workflowId: d.workflowId, runId: d.runId, type: d.type, startTime: d.startTime.toISOString() };
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return undefined;
        throw err;
      }
    },

    /**
     * Copies a child workflow's progress events into this activity's workflow as they
     * appear (one signal per poll that found any), so the parent's stream shows the child's
     * steps live. Resumes after the last relayed event when retried. Returns the number of
     * events relayed once the child has closed and every event is across.
     */
    async relayProgress(input: { workflowId: string; runId?: string }): Promise<number> {
      const ctx = Context.current();
      const parent = ctx.info.workflowExecution;
      if (!parent) throw new Error('relayProgress needs an activity started by a workflow');
      const target = client.workflow.getHandle(parent.workflowId, parent.runId);
      const child = client.workflow.getHandle(input.workflowId, input.runId);
      let cursor = (ctx.info.heartbeatDetails as number | undefined) ?? 0;
      let polls = 0;
      for (;;) {
        ctx.heartbeat(cursor);
        let closed = false;
        try {
          const page = await child.query(progressQuery, cursor);
          if (page.events.length > 0) {
            const events: Array<Omit<ProgressEvent, 'seq'>> = page.events.map(({ step, status, message }) => ({ step, status, message }));
            await target.signal(relayedProgressSignal, { events });
            cursor = page.events[page.events.length - 1].seq;
            ctx.heartbeat(cursor);
            if (cursor < page.lastSeq) continue; // more pages waiting
          }
          if (page.state !== 'running' && cursor >= page.lastSeq) return cursor;
          // A child terminated from outside never leaves 'running': its status says it closed.
          if (++polls % 5 === 0) closed = (await child.describe()).status.name !== 'RUNNING';
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return cursor;
          ctx.log.warn('could not relay progress', { error: String(err) });
        }
        if (closed) {
          // One last read for anything emitted before it closed.
          const last = await child.query(progressQuery, cursor).catch(() => undefined);
          if (last && last.events.length > 0) {
            await target.signal(relayedProgressSignal, { events: last.events.map(({ step, status, message }) => ({ step, status, message })) });
            cursor = last.events[last.events.length - 1].seq;
          }
          return cursor;
        }
        await ctx.sleep(RELAY_POLL_MS);
      }
    },
  };
}
