import type { Client } from '@temporalio/client';
import type { Config } from '../lib/config';
import type { NodeExecutor } from '../lib/executor/types';
import type { InstallSpec, RebuildTarget } from '../contract';
import { inspectVmForRebuild, RebuildRefusal } from '../activities/rebuild';

/** A refusal the API answers with a status and a message, before anything is started. */
export class RebuildRefused extends Error {
  override readonly name = 'RebuildRefused';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * What a refusal of the rebuild's check means over HTTP. A disabled VMID is a bad request
 * (as for every VM-scoped endpoint); a VM the product did not install conflicts with what
 * is there; a VM that is not there is 404.
 */
const STATUS_BY_TYPE: Record<RebuildRefusal['type'], number> = {
  VmDisabledError: 400,
  NotOwnedError: 409,
  VmBusyError: 409,
  VmNotFoundError: 404,
};

/**
 * A VMID in a path, read as the other VM endpoints read it (api/vm.ts). Leading zeros are
 * refused: `0240` is not how anyone writes VM 240, so it is more likely a mistake than a name.
 */
export function parseVmid(raw: string): number | undefined {
  const n = /^[1-9]\d{0,8}$/.test(raw) ? Number(raw) : NaN;
  return Number.isSafeInteger(n) ? n : undefined;
}

/** The 400 message for a path VMID parseVmid refused. */
export function vmidProblem(raw: string): string {
  return /^0+\d/.test(raw) ? 'id: must be a VMID without leading zeros' : 'id: must be a positive integer VMID';
}

/**
 * The rebuild's own check, run by the API before it starts anything (the workflow runs it
 * again: a schedule's runs have no API in front of them). Throws RebuildRefused.
 */
export async function checkRebuildTarget(
  deps: { config: Config; executors: Record<string, NodeExecutor>; client: Client },
  input: { vmid: number; spec?: InstallSpec },
): Promise<RebuildTarget> {
  try {
    return await inspectVmForRebuild(deps, input);
  } catch (err) {
    if (err instanceof RebuildRefusal) throw new RebuildRefused(STATUS_BY_TYPE[err.type], err.message);
    throw new RebuildRefused(502, `could not read the cluster: ${(err as Error).message}`);
  }
}
