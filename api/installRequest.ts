import { describeIssues } from './issues';
import { InvalidRequestError } from './errors';
import type { Config } from '../lib/config';
import { checkInput, type InstallSecrets, type InstallSpec, installBodySchema, installSpecFromBody, installSpecSchema, InvalidInputError } from '../contract';

/**
 * `POST /api/vm/install` (and a schedule's `spec`): the body checked with the contract's
 * schema, the node with the cluster's, then the seed's defaults and clamping. The spec is
 * checked once more with the schema the workflow and its activities check it with, so a
 * request the API accepts is one the worker accepts.
 */
export function toInstallSpec(
  raw: unknown,
  config: Config,
  knownNodes: string[],
): { spec: InstallSpec; secrets: InstallSecrets } {
  const parsed = installBodySchema.safeParse(raw);
  if (!parsed.success) throw new InvalidRequestError(describeIssues(parsed.error, raw));
  const b = parsed.data;
  if (b.node !== undefined && !knownNodes.includes(b.node)) {
    throw new InvalidRequestError(`node: must be one of the cluster's nodes (${knownNodes.join(', ')})`);
  }
  let spec: InstallSpec;
  try {
    // Only VM_MAX_* below the floors (VM_MAX_DISK=8) make a spec the worker would refuse.
    spec = checkInput(installSpecSchema, installSpecFromBody(b, config.limits), 'install');
  } catch (err) {
    if (err instanceof InvalidInputError) throw new InvalidRequestError(`${err.message} (check VM_MAX_CPU, VM_MAX_RAM and VM_MAX_DISK)`);
    throw err;
  }
  return {
    spec,
    secrets: omitUndefined({ passwd: b.passwd ?? config.defaultCiPassword, rootPassword: config.rootPassword }),
  };
}

function omitUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
