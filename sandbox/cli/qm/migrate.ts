import fs from 'node:fs';
import { parseArgs, type CommandDef } from '../args';
import { CliError, paramError } from '../errors';
import type { Ctx } from '../context';
import { VMID } from '../vmOptions';
import * as f from '../formats';
import { nodeOf } from '../../state/model';
import { moveVmid } from '../../state/vmlist';
import { getVolume, moveVolume } from '../../state/volumes';
import { vmProcess } from '../../state/runtime';
import { createExclusive } from '../../state/files';
import { serializeConf } from '../../state/vmconf';
import { storageFor } from '../storage';
import { checkLock, diskEntries, isCloudinit, loadVm, withVmLock, writeVm } from './vm';

const DEF: CommandDef = {
  name: 'qm migrate',
  args: ['vmid', 'target'],
  props: {
    vmid: VMID,
    target: { type: 'string', format: f.nodeName },
    online: { type: 'boolean', optional: true },
    'with-local-disks': { type: 'boolean', optional: true },
    targetstorage: { type: 'string', optional: true },
    force: { type: 'boolean', optional: true },
    bwlimit: { type: 'integer', optional: true, minimum: 0 },
    migration_type: { type: 'string', optional: true, enum: ['secure', 'insecure'] },
    migration_network: { type: 'string', optional: true },
  },
};

const stamp = () => {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
};

function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(Math.floor(s / 3600))}:${p(Math.floor(s / 60) % 60)}:${p(s % 60)}`;
}

/**
 * `qm migrate`: migrate_vm checks (before the task) then QemuMigrate's log, one
 * timestamped line per step. Local disks move with the config to the target node's
 * storage of the same name. An online migration keeps the VM's process running (the
 * sandbox's VM processes are not tied to a node), as a live migration keeps the guest.
 */
export function qmMigrate(ctx: Ctx, argv: string[]): number {
  const p = parseArgs(DEF, argv);
  const vmid = Number(p.vmid);
  const target = p.target;
  if (target === ctx.node) throw paramError({ target: 'target is local node.' }, 'qm migrate <vmid> <target> [OPTIONS]');
  const targetNode = nodeOf(ctx.model, target);
  if (!targetNode) throw new CliError(`no such cluster node '${target}'`);
  if (!targetNode.online) throw new CliError(`node '${target}' seems to be offline`);
  if (p.targetstorage) throw new CliError('sandbox: --targetstorage is not implemented');

  const conf = loadVm(ctx, vmid);
  checkLock(conf);
  const running = !!vmProcess(ctx.dir, vmid);
  if (running && p.online !== '1') throw new CliError("can't migrate running VM without --online");
  if (!running && p.online === '1') ctx.err("VM isn't running. Doing offline migration instead.");
  const disks = diskEntries(conf).filter(({ drive }) => getVolume(ctx.dir, ctx.node, drive.volid));
  for (const { drive } of disks) storageFor(ctx, drive.volid.split(':')[0], target);

  const started = Date.now();
  const log = (msg: string) => ctx.out(`${stamp()} ${msg}`);
  // QemuMigrate's phases run under the VM's config lock (pve-guest-common
  // AbstractMigrate.pm `migrate` → QemuMigrate `lock_vm` → `lock_config`, 10 s): a lock
  // held elsewhere aborts the migration with the lock's text in the log.
  try {
    withVmLock(ctx, vmid, () => {
      log(`starting migration of VM ${vmid} to node '${target}' (${targetNode.ip})`);
      for (const { key, drive } of disks) {
        if (isCloudinit(drive)) log(`found generated disk '${drive.volid}' (in current VM config)`);
        else log(`found local disk '${drive.volid}' (${/^unused/.test(key) ? 'unused' : 'attached'})`);
      }
      const copied = disks.filter(({ drive }) => !isCloudinit(drive));
      if (running && copied.some(({ key }) => !/^unused/.test(key)) && p['with-local-disks'] !== '1') {
        const first = copied.find(({ key }) => !/^unused/.test(key))!;
        log(`can't migrate local disk '${first.drive.volid}': can't live migrate attached local disks without with-local-disks option`);
        const why = 'Problem found while scanning volumes - can\'t migrate VM - check log';
        log(`ERROR: ${why}`);
        log(`ERROR: migration aborted (duration ${duration(Date.now() - started)}): ${why}`);
        throw new CliError('migration aborted');
      }

      writeVm(ctx, vmid, { ...conf, props: { ...conf.props, lock: 'migrate' } });
      if (running) {
        log(`starting VM ${vmid} on remote node '${target}'`);
        for (const { drive } of copied) log(`volume '${drive.volid}' is '${drive.volid}' on the target`);
        log('start remote tunnel');
        log('starting online/live migration on unix:/run/qemu-server/' + vmid + '.migrate');
        log('migration status: completed');
      } else if (copied.length > 0) {
        log('copying local disk images');
        for (const { drive } of copied) {
          log(`successfully imported '${drive.volid}'`);
          log(`volume '${drive.volid}' is '${drive.volid}' on the target`);
        }
      }
      for (const { drive } of disks) moveVolume(ctx.dir, ctx.node, target, drive.volid);
      // The config appears on the target before it leaves the source, as pmxcfs's rename.
      if (!createExclusive(ctx.paths.conf(target, vmid), serializeConf(conf))) {
        throw new CliError(`migration aborted - config file already exists on node '${target}'`);
      }
      moveVmid(ctx.dir, vmid, target);
      fs.rmSync(ctx.paths.conf(ctx.node, vmid), { force: true });
      log(`migration finished successfully (duration ${duration(Date.now() - started)})`);
    });
  } catch (e) {
    if (!(e instanceof CliError) || !/^can't lock file/.test(e.message)) throw e;
    log(`ERROR: migration aborted (duration ${duration(Date.now() - started)}): ${e.message}`);
    throw new CliError('migration aborted');
  }
  return 0;
}
