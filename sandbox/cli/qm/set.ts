import { parseArgs, usageLine, type CommandDef, type Params } from '../args';
import { CliError } from '../errors';
import type { Ctx } from '../context';
import { VM_OPTIONS, VMID, optionsOnRelease } from '../vmOptions';
import { nodePveVersion } from '../../state/model';
import { freeVolume, type Volume } from '../../state/volumes';
import { applyVmOptions, deleteVmOptions } from './apply';
import { sshkeysFromFile, validateSshKeys } from './sshkeys';
import { assertDigest, checkLock, loadVm, withVmLock, writeVm } from './vm';

export const SET_DEF: CommandDef = {
  name: 'qm set',
  args: ['vmid'],
  props: {
    vmid: VMID,
    ...VM_OPTIONS,
    delete: { type: 'string', optional: true },
    revert: { type: 'string', optional: true },
    skiplock: { type: 'boolean', optional: true },
    force: { type: 'boolean', optional: true },
    digest: { type: 'string', optional: true, maxLength: 64 },
  },
};

/**
 * `qm set`: update_vm, synchronous (not a task). Prints `update VM <id>: -k v ...` with
 * the keys sorted and the password hidden, before changing anything.
 *
 * Simplification: changes to a running VM are applied at once instead of being kept under
 * `[PENDING]` until the next boot.
 */
export function qmSet(ctx: Ctx, argv: string[]): number {
  const params = parseArgs({ ...SET_DEF, props: optionsOnRelease(SET_DEF.props, nodePveVersion(ctx.model, ctx.node).release) }, argv);
  if (params.sshkeys !== undefined) params.sshkeys = sshkeysFromFile(params.sshkeys);
  return updateVm(ctx, params);
}

/** update_vm once the parameters are valid (`sshkeys` URI-escaped): shared with the REST API. */
export function updateVm(ctx: Ctx, validated: Params): number {
  const params = { ...validated };
  const vmid = Number(params.vmid);
  const digest = params.digest;
  delete params.vmid;
  delete params.digest;

  const logged = Object.keys(params)
    .sort()
    .flatMap((k) => [`-${k}`, k === 'cipassword' ? '<hidden>' : params[k]]);
  const skiplock = params.skiplock === '1';
  const del = params.delete;
  for (const k of ['skiplock', 'delete', 'revert', 'force']) delete params[k];
  if (params.sshkeys !== undefined) validateSshKeys(params.sshkeys);
  if (!del && Object.keys(params).length === 0) throw new CliError('no options specified');

  return withVmLock(ctx, vmid, () => {
    assertDigest(ctx, vmid, digest);
    const conf = loadVm(ctx, vmid);
    if (!skiplock) checkLock(conf);
    ctx.out(`update VM ${vmid}: ${logged.join(' ')}`);
    if (del) deleteVmOptions(ctx, conf, del);
    const allocated: Volume[] = [];
    try {
      applyVmOptions(ctx, vmid, conf, params, allocated, usageLine(SET_DEF));
    } catch (e) {
      for (const v of allocated) freeVolume(ctx.dir, ctx.node, v.volid);
      throw e;
    }
    writeVm(ctx, vmid, conf);
    return 0;
  });
}
