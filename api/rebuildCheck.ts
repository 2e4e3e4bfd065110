import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { ProxmoxCluster } from '../lib/proxmox';
import { failureStatus, type InstallSpec, type RebuildTarget } from '../contract';
import { HttpError } from './errors';
import { inspectVmForRebuild, RebuildRefusal } from '../lib/vm/rebuildTarget';

/**
 * The rebuild's own check, run by the API before it starts anything (the workflow runs it
 * again: a schedule's runs have no API in front of them). A refusal is an HttpError with
 * the status of its failure type (contract/failures.ts): a disabled VMID 400, a VM the
 * product did not install or one still being built 409, a missing VM 404.
 */
export async function checkRebuildTarget(
  deps: { config: Config; proxmox: ProxmoxCluster; client: Client },
  input: { vmid: number; spec?: InstallSpec },
): Promise<RebuildTarget> {
  try {
    return await inspectVmForRebuild(deps, input);
  } catch (err) {
    if (err instanceof RebuildRefusal) throw new HttpError(failureStatus(err.type), err.message);
    throw new HttpError(502, `could not read the cluster: ${(err as Error).message}`);
  }
}
