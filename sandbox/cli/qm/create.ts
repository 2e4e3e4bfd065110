import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { parseArgs, usageLine, type CommandDef, type Params } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { VM_OPTIONS, VMID, optionsOnRelease } from '../vmOptions';
import { nodePveVersion } from '../../state/model';
import { claimVmid, releaseVmid, vmOwner } from '../../state/vmlist';
import { freeVolume, type Volume } from '../../state/volumes';
import type { VmConf } from '../../state/vmconf';
import { applyVmOptions } from './apply';
import { sshkeysFromFile, validateSshKeys } from './sshkeys';
import { createVmExclusive, defaultBootOrder, withVmLock, writeVm } from './vm';
import { startVm } from './power';
import { addVmToPool, poolExists, poolMissingText } from '../../state/pools';

export const CREATE_DEF: CommandDef = {
  name: 'qm create',
  args: ['vmid'],
  props: {
    vmid: VMID,
    ...VM_OPTIONS,
    start: { type: 'boolean', optional: true },
    unique: { type: 'boolean', optional: true },
    pool: { type: 'string', optional: true },
    storage: { type: 'string', optional: true },
  },
};

/**
 * `qm create`: create_vm. The VMID check is cluster-wide and happens before the task
 * forks; the config exists with only `lock: create` while the task builds it; a failing
 * task removes the config and frees what it allocated.
 */
export function qmCreate(ctx: Ctx, argv: string[]): number {
  const params = parseArgs({ ...CREATE_DEF, props: optionsOnRelease(CREATE_DEF.props, nodePveVersion(ctx.model, ctx.node).release) }, argv);
  if (params.sshkeys !== undefined) params.sshkeys = sshkeysFromFile(params.sshkeys);
  createVm(ctx, params);
  return 0;
}

/**
 * create_vm's work once the parameters are valid (`sshkeys` URI-escaped, as the API takes
 * it): what `qm create` and the REST API's create task share.
 */
export function createVm(ctx: Ctx, validated: Params): void {
  const params = { ...validated };
  const vmid = Number(params.vmid);
  delete params.vmid;
  const start = params.start === '1';
  const pool = params.pool;
  for (const k of ['start', 'unique', 'pool', 'storage']) delete params[k];
  if (params.sshkeys !== undefined) validateSshKeys(params.sshkeys);

  // create_vm checks the pool before anything else (qemu-server API2/Qemu.pm, check_pool_exist).
  if (pool !== undefined && !poolExists(ctx.model, pool)) throw new CliError(`403 ${poolMissingText(pool)}`);
  const fail = (why: string) => new CliError(`unable to create VM ${vmid} - ${why}`);
  const owner = vmOwner(ctx.dir, vmid);
  if (owner) throw fail(`VM ${vmid} already exists on node '${owner}'`);
  // create_vm builds the VM under its config lock, waiting 1 s for it (qemu-server
  // API2/Qemu.pm, `lock_config_full($vmid, 1, $realcmd)`); a timeout has no prefix.
  withVmLock(ctx, vmid, () => createLocked(ctx, vmid, params, fail), 1000);
  // add_vm_to_pool: user.cfg, once the config is written; never in the VM's config.
  if (pool !== undefined) addVmToPool(ctx.dir, pool, vmid);
  if (start) {
    ctx.out('Execute autostart');
    startVm(ctx, vmid);
  }
}

function createLocked(ctx: Ctx, vmid: number, params: Params, fail: (why: string) => CliError): void {
  // Two creates of one VMID racing (on any nodes): exactly one claims it.
  const winner = claimVmid(ctx.dir, vmid, ctx.node);
  if (winner) throw fail(`VM ${vmid} already exists on node '${winner}'`);
  if (!createVmExclusive(ctx, vmid, { props: { lock: 'create' }, sections: '' })) {
    releaseVmid(ctx.dir, vmid);
    throw fail('config file already exists');
  }

  const allocated: Volume[] = [];
  try {
    const conf: VmConf = { props: {}, sections: '' };
    applyVmOptions(ctx, vmid, conf, params, allocated, usageLine(CREATE_DEF));
    conf.props.meta = `creation-qemu=${ctx.model.qemuVersion},ctime=${Math.floor(Date.now() / 1000)}`;
    // qemu-server's create_vm: a uuid unless the caller gave smbios1; a generation id unless
    // the caller gave one, `1` asking for a generated one too (the sandbox's VMs are x86_64).
    conf.props.smbios1 ??= `uuid=${randomUUID()}`;
    if (conf.props.vmgenid === undefined || conf.props.vmgenid === '1') conf.props.vmgenid = randomUUID();
    if (!conf.props.boot) {
      const order = defaultBootOrder(conf);
      if (order) conf.props.boot = order;
    }
    writeVm(ctx, vmid, conf);
  } catch (e) {
    for (const v of allocated) freeVolume(ctx.dir, ctx.node, v.volid);
    fs.rmSync(ctx.paths.conf(ctx.node, vmid), { force: true });
    releaseVmid(ctx.dir, vmid);
    throw e instanceof CliError && !e.message.startsWith('400 ') ? fail(e.message) : e;
  }
}
