import { type FailureType, type IssuedCommand, progressQuery, VM_ID, VM_NODE, VM_OPERATION, vmWorkflowId, type Workflows, type WorkflowType } from '../../contract';
import { Client, WorkflowExecutionAlreadyStartedError, WorkflowHandle } from '@temporalio/client';
import { HttpError } from '../errors';
import type { Logger } from '../../lib/observability/log';
import { decodeListedMemo, listWorkflows } from '../../lib/temporal/workflowListing';

/**
 * Starting an operation on an existing VM, one at a time per VM across every API
 * instance: each runs as the workflow `vm-<vmid>` with the conflict policy FAIL, so
 * Temporal refuses a second one while one runs. Installs use other workflow ids, so a
 * running install of the VMID is looked up in visibility. Any workflow that acts on an
 * existing VM (a rebuild, too) should start through here.
 */

/** Another workflow holds the VM: the API answers 409 naming it. */
class VmBusyError extends HttpError {
  override readonly name = 'VmBusyError' satisfies FailureType;
  constructor(
    message: string,
    readonly workflowId: string,
    readonly operation: string,
  ) {
    super(409, message, { workflowId, operation });
  }
}

/** One run of a per-VM workflow type, with the arguments its contract takes. */
export type VmOperation = {
  [K in WorkflowType]: { workflow: K; args: Parameters<Workflows[K]> };
}[WorkflowType];

export type VmOperationOptions = VmOperation & {
  client: Client;
  taskQueue: string;
  vmid: number;
  /** Node the VM is on, or the target of a migration. */
  node: string;
  /** The VmOperation search attribute: `start`, `set-cpu`, ... */
  operation: string;
  /** One line shown in the Temporal UI. */
  summary: string;
  /** Who started it (api/startedBy.ts), when tokens are configured. */
  memo?: Record<string, string>;
  /** Where a workflow on the VM that this deployment cannot read is reported. */
  logger: Logger;
  /**
   * The VM's SMBIOS uuid as read when the command was accepted (lib/proxmox/vmInstance.ts);
   * undefined only for a rebuild of a VM that does not exist.
   */
  instance: string | undefined;
};

/** How long a start waits for an operation that has finished its work but not yet closed. */
const FINISHING_WAIT_MS = 10_000;

export async function startVmOperation(opts: VmOperationOptions): Promise<WorkflowHandle> {
  const { client, vmid } = opts;
  const workflowId = vmWorkflowId(vmid);
  const args = issued(opts.args, { workflowId, instance: opts.instance });
  const install = await runningWorkflowOn(client, vmid, opts.logger);
  if (install) {
    throw new VmBusyError(`VM ${vmid} is busy: ${install.type} (workflow ${install.workflowId}) is running on it`, install.workflowId, install.type);
  }
  for (let attempt = 0; ; attempt++) {
    try {
      return await client.workflow.start(opts.workflow, {
        taskQueue: opts.taskQueue,
        workflowId,
        args,
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        typedSearchAttributes: [
          { key: VM_ID, value: vmid },
          { key: VM_NODE, value: opts.node },
          { key: VM_OPERATION, value: opts.operation },
        ],
        staticSummary: opts.summary,
        ...(opts.memo && Object.keys(opts.memo).length > 0 ? { memo: opts.memo } : {}),
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      const holder = await describeHolder(client, workflowId);
      // A client that read an operation's last event may ask for the next one a few
      // milliseconds before that workflow closes: wait for it instead of refusing.
      if (attempt < 2 && (holder.closed || holder.finishing)) {
        if (holder.finishing) await waitClosed(client, workflowId);
        continue;
      }
      throw new VmBusyError(`VM ${vmid} is busy: ${holder.type} (workflow ${workflowId}) is running on it`, workflowId, holder.type);
    }
  }
}

/**
 * The arguments with the command's issue (contract/workflows.ts IssuedCommand): the VM
 * instance it is for, now, and the workflow id it is for, so that a copy of this input
 * started later or under another id is refused by the workflow, and one that meets another
 * VM at the VMID by the activity.
 */
function issued(args: VmOperation['args'], to: { workflowId: string; instance: string | undefined }): VmOperation['args'] {
  const [input, ...rest] = args;
  const stamp: IssuedCommand = { issuedAt: Date.now(), issuedFor: to.workflowId, ...(to.instance !== undefined ? { instance: to.instance } : {}) };
  return [{ ...input, ...stamp }, ...rest] as VmOperation['args'];
}

async function describeHolder(client: Client, workflowId: string): Promise<{ type: string; closed: boolean; finishing: boolean }> {
  const handle = client.workflow.getHandle(workflowId);
  try {
    const d = await handle.describe();
    if (d.status.name !== 'RUNNING') return { type: d.type, closed: true, finishing: false };
    const page = await handle.query(progressQuery, Number.MAX_SAFE_INTEGER).catch(() => undefined);
    return { type: d.type, closed: false, finishing: page !== undefined && page.state !== 'running' };
  } catch {
    return { type: 'another operation', closed: false, finishing: false };
  }
}

async function waitClosed(client: Client, workflowId: string): Promise<void> {
  const done = client.workflow
    .getHandle(workflowId)
    .result()
    .catch(() => undefined);
  await Promise.race([done, new Promise((r) => setTimeout(r, FINISHING_WAIT_MS))]);
}

/**
 * A running workflow other than `vm-<vmid>` that carries this VmId (an install). Visibility
 * lags behind, so each hit is confirmed with the workflow itself: one that has closed, or
 * whose progress says its work is done, no longer holds the VM. Listed raw, since one memo
 * the SDK cannot decode would end its whole listing (lib/temporal/workflowListing.ts).
 */
async function runningWorkflowOn(client: Client, vmid: number, logger: Logger): Promise<{ workflowId: string; type: string } | undefined> {
  const query = `VmId = ${vmid} AND ExecutionStatus = 'Running' AND WorkflowId != '${vmWorkflowId(vmid)}'`;
  for await (const wf of listWorkflows(client, query, 20)) {
    const workflowId = wf.execution?.workflowId ?? '';
    const type = wf.type?.name ?? 'a workflow';
    const decoded = await decodeListedMemo(client, wf);
    if ('error' in decoded) {
      // Our installs always carry a memo our keys sealed. One we cannot decode belongs to a
      // deployment with other keys (or to a key dropped too early): our workers could not
      // read its history either, so it cannot act on the VM for us and does not hold it.
      // Named in the log so whoever owns it can be found, instead of failing the request.
      logger.warn(
        { workflowId, workflowType: type, vmid, reason: decoded.error.message },
        `workflow ${workflowId} (${type}) carries VmId ${vmid} but its memo cannot be decoded here (${decoded.error.message}): not counted as holding the VM`,
      );
      continue;
    }
    const handle = client.workflow.getHandle(workflowId, wf.execution?.runId ?? undefined);
    const d = await handle.describe().catch(() => undefined);
    if (d && d.status.name !== 'RUNNING') continue;
    const page = await handle.query(progressQuery, Number.MAX_SAFE_INTEGER).catch(() => undefined);
    if (page && page.state !== 'running') continue;
    return { workflowId, type };
  }
  return undefined;
}
