import { describeIssues } from './issues';
import { InvalidRequestError } from './errors';
import type { Config } from '../lib/config';
import { parseUserData, UserDataError } from '../lib/vm/userData';
import {
  type AddressPool,
  assignable,
  checkInput,
  field,
  type InstallBody,
  ipToNumber,
  LIMITS,
  poolOfAddress,
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
  /** The installing token's tenant (api/guard.ts tenantScope), recorded in the sealed spec. */
  tenant?: string,
): { spec: InstallSpec; secrets: InstallSecrets } {
  const parsed = installBodySchema.safeParse(raw);
  if (!parsed.success) throw new InvalidRequestError(describeIssues(parsed.error, raw));
  const b = parsed.data;
  if (b.node !== undefined && !knownNodes.includes(b.node)) {
    throw new InvalidRequestError(`node: must be one of the cluster's nodes (${knownNodes.join(', ')})`);
  }
  const address = addressOf(b, config);
  let spec: InstallSpec;
  try {
    // Only VM_MAX_* below the floors (VM_MAX_DISK=8) make a spec the worker would refuse.
    spec = checkInput(installSpecSchema, { ...installSpecFromBody(b, config.limits), ...address, ...(tenant !== undefined ? { tenant } : {}) }, 'install');
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

/**
 * The address pool and address a body asks for, checked against ADDRESS_POOLS (the worker
 * checks again). Without pools: an `addressPool` is a 400, `ip` is ignored as the seed
 * ignored it, and `id` stays within GATEWAY's /24. With pools every install gets one: the
 * pool named, else the one holding `ip`, else the first.
 */
function addressOf(b: InstallBody, config: Config): Pick<InstallSpec, 'addressPool' | 'ip'> {
  const pools = (config.addressPools ?? []) as readonly AddressPool[];
  if (b.ip === 'dhcp') {
    // The network's DHCP server gives the address: no pool is involved (installSpecFromBody keeps `ip`).
    if (b.addressPool !== undefined) throw new InvalidRequestError('addressPool: goes with a static address, not with ip "dhcp"');
    if (b.id !== undefined && b.id > LIMITS.installVmid.max) throw new InvalidRequestError(`id: must be at most ${LIMITS.installVmid.max} with ip "dhcp" (larger VMIDs take an address pool)`);
    return {};
  }
  if (pools.length === 0) {
    if (b.addressPool !== undefined) throw new InvalidRequestError('addressPool: no address pools are configured (ADDRESS_POOLS)');
    if (b.id !== undefined && b.id > LIMITS.installVmid.max) {
      // The words of the seed's bound: without pools nothing changed.
      throw new InvalidRequestError(`id: must be at most ${LIMITS.installVmid.max}`);
    }
    return {};
  }
  const names = pools.map((p) => p.name).join(', ');
  const named = b.addressPool === undefined ? undefined : pools.find((p) => p.name === b.addressPool);
  if (b.addressPool !== undefined && !named) throw new InvalidRequestError(`addressPool: no address pool named '${b.addressPool}' (configured: ${names})`);
  if (b.ip === undefined || b.ip === '') return { addressPool: (named ?? pools[0]).name };
  if (!field.staticIp.safeParse(b.ip).success) throw new InvalidRequestError('ip: must be an IPv4 address like 192.0.2.10');
  const holder = poolOfAddress(pools, b.ip);
  if (!holder) throw new InvalidRequestError(`ip: ${b.ip} is in no address pool (configured: ${pools.map((p) => `${p.name} ${p.cidr}`).join(', ')})`);
  if (named && named !== holder) throw new InvalidRequestError(`ip: ${b.ip} is in address pool '${holder.name}', not '${named.name}'`);
  if (!assignable(holder, ipToNumber(b.ip))) {
    throw new InvalidRequestError(`ip: ${b.ip} is never handed out by address pool '${holder.name}' (its network, broadcast or gateway address, or reserved)`);
  }
  return { addressPool: holder.name, ip: b.ip };
}

function omitUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
