import {
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  setHandler,
  sleep,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  failureOf,
  type InstallInput,
  type RebuildInput,
  rebuildInstallWorkflowId,
  type RebuildResult,
  type RebuildTarget,
  relayedProgressSignal,
  VM_ID,
  VM_OPERATION,
  vmName,
  vmSearchAttributes,
  workflowInputs,
  type FailureType,
  type InstallSpec,
  renameLegacySpecFields,
  rebuildSteps,
} from '../contract';
import { cleanup, follow, proxmox } from './activityOptions';
import { installVm } from './install';
import { Progress } from './progress';
import { checkedWorkflowInput } from './checkInput';

/**
 * Re-creates a VM QemuRun installed, from the spec recorded in its description: same
 * VMID (so same IP), name, node, OS and version, size and keys. check → stop → destroy
 * (purge) → install (installVm as a child, its progress relayed into this stream). Runs as
 * `vm-<vmid>` like every per-VM operation. Refuses a disabled, missing or foreign VM
 * before touching anything.
 */
export async function vmRebuild(input: RebuildInput): Promise<RebuildResult> {
  checkedWorkflowInput(workflowInputs.rebuild, input);
  const { vmid } = input;
  const progress = new Progress();
  const started = Date.now();
  const { workflowId, runId } = workflowInfo();
  // The child's events keep their own steps. Its error event is downgraded: the last
  // event of this stream is this workflow's own verdict.
  setHandler(relayedProgressSignal, ({ events }) => {
    for (const e of events) progress.emit(e.step, e.status === 'error' ? 'processing' : e.status, e.message);
  });

  const step = progress.step.bind(progress);

  progress.emit(rebuildSteps.workflow.wire, 'info', `[*] workflow id: ${workflowId}`);
  upsertSearchAttributes([
    { key: VM_OPERATION, value: 'rebuild' },
    { key: VM_ID, value: vmid },
  ]);

  /** How far the rebuild got, for the operator reading a failure. */
  let stage: 'untouched' | 'destroying' | 'destroyed' = 'untouched';
  try {
    const target = await step(rebuildSteps.check.wire, `checking VM ${vmid}`, () =>
      proxmox.inspectRebuildTarget({ vmid, spec: input.spec }),
    );
    const { spec, mainNode } = target;
    const name = vmName(spec.name, vmid);
    // mainNode comes from the worker's check (recorded in history), like the node the install creates on.
    upsertSearchAttributes(vmSearchAttributes('rebuild', spec, { vmid, node: spec.node ?? mainNode }));
    progress.info(rebuildSteps.check.wire, describeTarget(target, name));
    const { rootPassword } = await proxmox.initRootPassword();
    const password = input.passwd !== undefined
      ? { passwd: input.passwd }
      : await proxmox.keptCiPassword({ vmid, node: target.exists ? target.node : undefined });

    let replacedOwner: string | undefined;
    if (target.exists) {
      const { owner, ownerRun: run } = target;
      replacedOwner = owner;
      await step(rebuildSteps.stop.wire, `stopping VM ${vmid}`, async () => {
        if (!(await proxmox.stopOwnedVm({ vmid, owner, run }))) progress.info(rebuildSteps.stop.wire, `VM ${vmid} was already stopped`);
      });
      stage = 'destroying';
      await step(rebuildSteps.destroy.wire, `destroying VM ${vmid} and its disks`, async () => {
        if (!(await cleanup.destroyOwnedVm({ vmid, owner, run }))) progress.info(rebuildSteps.destroy.wire, `VM ${vmid} was already gone`);
      });
      stage = 'destroyed';
    }

    const installId = rebuildInstallWorkflowId(workflowId, runId);
    const installed = await step(rebuildSteps.install.wire, `re-creating VM ${vmid} (workflow ${installId})`, () =>
      runInstall(installId, { spec, secrets: { ...password, ...(rootPassword !== undefined ? { rootPassword } : {}) } }, spec.node ?? mainNode, progress),
    );

    const elapsedSec = (Date.now() - started) / 1000;
    progress.finished(rebuildSteps.finalizing.wire, `VM rebuild completed in ${elapsedSec.toFixed(2)}s`, installed);
    return { ...installed, elapsedSec, installWorkflowId: installId, replacedOwner };
  } catch (err) {
    const cancelled = isCancellation(err);
    const { message, type } = failureOf(err);
    const why = cancelled ? 'rebuild cancelled' : message;
    const aftermath = {
      untouched: `nothing was destroyed`,
      destroying: `VM ${vmid} may be partly destroyed`,
      destroyed: `VM ${vmid} was destroyed and has not been re-created`,
    }[stage];
    progress.emit(progress.current || rebuildSteps.check.wire, 'error', `[-] ${why} (${aftermath})`);
    progress.state = cancelled ? 'cancelled' : 'failed';
    if (cancelled) throw err;
    // The failure an operator reads in the UI (and the API maps to a status) names the cause.
    throw ApplicationFailure.create({ message: `${why} (${aftermath})`, type: type ?? ('RebuildError' satisfies FailureType), nonRetryable: true, cause: err as Error });
  }
}

/**
 * Runs installVm as a child and relays its events here until it closes. The child is
 * findable by its VM's id, name and node from its start, even when it fails before its own
 * qm create sets them.
 */
async function runInstall(installId: string, input: InstallInput, node: string, progress: Progress) {
  const { spec } = input;
  const child = await startChild(installVm, {
    workflowId: installId,
    args: [input],
    // Cancelling or terminating the rebuild cancels the install, which removes what it built.
    parentClosePolicy: 'REQUEST_CANCEL',
    typedSearchAttributes: vmSearchAttributes('install', spec, { node }),
    memo: { request: spec, rebuild: workflowInfo().workflowId },
    staticSummary: `re-install ${spec.os} ${spec.version} as VM ${spec.vmid} for ${workflowInfo().workflowId}`,
  });
  progress.info(rebuildSteps.install.wire, `install workflow ${child.workflowId} started`);
  const relayScope = new CancellationScope();
  const relay = relayScope
    .run(() => follow.relayProgress({ workflowId: child.workflowId, runId: child.firstExecutionRunId }))
    .catch(() => 0);
  try {
    return await child.result();
  } finally {
    // Every event of the child is across before this workflow adds its own last ones.
    await CancellationScope.nonCancellable(() => Promise.race([relay, sleep('1m')]));
    relayScope.cancel();
  }
}

function describeTarget(target: RebuildTarget, name: string): string {
  // A check recorded before `cores` had its name (a rebuild in flight across an upgrade) says `cpu`.
  const spec = renameLegacySpecFields(target.spec) as InstallSpec;
  const what = `${spec.os} ${spec.version}, ${spec.cores} cores, ${spec.ramMb} MB RAM, ${spec.diskGb}G disk, user ${spec.user}`;
  if (!target.exists) return `VM ${target.vmid} does not exist: installing ${name} from the given spec (${what})`;
  const moved = target.movedFrom ? `; it was installed on ${target.movedFrom} and is rebuilt where it lives now` : '';
  return `VM ${target.vmid} (${name}) is ${target.status} on ${target.node}, installed by ${target.owner}${moved}; re-creating it as ${what}`;
}
