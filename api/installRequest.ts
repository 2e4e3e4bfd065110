import { describeIssues } from './issues';
import { InvalidRequestError } from './errors';
import type { Config } from '../lib/config';
import { parseUserData, UserDataError } from '../lib/vm/userData';
import {
  checkInput,
  type InstallSecrets,
  type InstallSpec,
  installBodySchema,
  installedDescriptionOverflow,
  installSpecFromBody,
  installSpecSchema,
  InvalidInputError,
  PROXMOX_DESCRIPTION_MAX,
} from '../contract';

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
  const overflow = installedDescriptionOverflow(spec);
  if (overflow > 0) {
    throw new InvalidRequestError(
      `description: is ${overflow} bytes too long: Proxmox keeps at most ${PROXMOX_DESCRIPTION_MAX} characters of description, and QemuRun's markers (which hold the spec, this text included) take their part`,
    );
  }
  if (b.userData !== undefined) userDataProblem(b.userData, config);
  return {
    spec,
    secrets: omitUndefined({ passwd: b.passwd ?? config.defaultCiPassword, rootPassword: config.rootPassword, userData: b.userData }),
  };
}

/**
 * userData's YAML and the keys QemuRun owns (lib/vm/userData.ts), as a 400 naming the field.
 * API mode cannot deliver it: Proxmox's API uploads no snippets (`upload` takes iso, vztmpl
 * and import only), and API mode reaches no node over SSH to write one.
 */
function userDataProblem(text: string, config: Config): void {
  if (config.proxmoxApi) {
    throw new InvalidRequestError(
      "userData: is not available in API mode: Proxmox's API cannot upload the cicustom snippet it needs (upload takes iso, vztmpl and import only); use CLI mode, or leave userData out",
    );
  }
  try {
    parseUserData(text);
  } catch (err) {
    if (err instanceof UserDataError) throw new InvalidRequestError(err.message);
    throw err;
  }
}

function omitUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
