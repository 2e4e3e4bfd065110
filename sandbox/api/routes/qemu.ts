import type { Prop } from '../../cli/args';
import type { Req, Route } from '../http';
import { ApiError, paramExc } from '../errors';
import { forkWorker, type TaskJob } from '../tasks';
import { CREATE_DEF } from '../../cli/qm/create';
import { SET_DEF, updateVm } from '../../cli/qm/set';
import { RESIZE_DEF } from '../../cli/qm/resize';
import { isDriveName } from '../../cli/vmOptions';
import { loadVm, parseDrive } from '../../cli/qm/vm';
import { guestResource, guests } from '../../cli/resources';
import { vmConfigView, vmStatusCurrent } from '../../cli/pvesh';
import { vmOwner } from '../../state/vmlist';
import { vmProcess } from '../../state/runtime';
import { nodeOf } from '../../state/model';
import { validateSshKeys } from '../../cli/qm/sshkeys';
import { CliError } from '../../cli/errors';
import { storageFor } from '../../cli/storage';
import { qmCloudinitDump } from '../../cli/qm/cloudinit';
import { makeCtx } from '../../cli/context';

/**
 * /nodes/{node}/qemu: qemu-server's API2::Qemu for the calls the product makes. Checks that
 * PVE makes before it forks the worker answer the request itself (500 with the message);
 * the rest runs as a task with the CLIs' own code, on the node of the path.
 */

const without = (props: Record<string, Prop>, ...keys: string[]) => Object.fromEntries(Object.entries(props).filter(([k]) => !keys.includes(k)));

// qemu-server's option groups (check_vm_modify_config_perm): which privilege an option needs.
const CPU = ['cores', 'cpu', 'cpulimit', 'cpuunits', 'numa', 'sockets', 'vcpus'];
const MEMORY = ['memory', 'balloon', 'shares'];
const HWTYPE = ['acpi', 'hotplug', 'kvm', 'machine', 'scsihw', 'smbios1', 'tablet', 'vga', 'watchdog'];
const GENERAL = ['agent', 'autostart', 'bios', 'description', 'keyboard', 'localtime', 'name', 'onboot', 'ostype', 'protection', 'reboot', 'startdate', 'startup', 'tdf', 'template'];
const DISK = ['boot', 'bootdisk', 'vmstatestorage'];
const CLOUDINIT = ['cicustom', 'cipassword', 'citype', 'ciuser', 'ciupgrade', 'nameserver', 'searchdomain', 'sshkeys'];

function checkConfigPerms(r: Req, vmid: string, keys: string[]): void {
  const vm = `/vms/${vmid}`;
  for (const k of keys) {
    if (isDriveName(k) || /^unused\d+$/.test(k)) r.check(vm, ['VM.Config.Disk']);
    else if (/^serial\d+$/.test(k) || k === 'tags') continue;
    else if (CPU.includes(k)) r.check(vm, ['VM.Config.CPU']);
    else if (MEMORY.includes(k)) r.check(vm, ['VM.Config.Memory']);
    else if (HWTYPE.includes(k)) r.check(vm, ['VM.Config.HWType']);
    else if (GENERAL.includes(k)) r.check(vm, ['VM.Config.Options']);
    else if (DISK.includes(k)) r.check(vm, ['VM.Config.Disk']);
    else if (/^net\d+$/.test(k)) r.check(vm, ['VM.Config.Network']);
    else if (CLOUDINIT.includes(k) || /^ipconfig\d+$/.test(k)) r.check(vm, ['VM.Config.Cloudinit', 'VM.Config.Network'], true);
    else if (k === 'vmgenid' || k === 'meta') continue;
    else throw new ApiError(500, `only root can set '${k}' config\n`);
  }
}

/** New disks (`<storage>:<size>`) need Datastore.AllocateSpace on their storage (check_storage_access). */
function checkStoragePerms(r: Req, params: Record<string, string>): void {
  for (const [k, v] of Object.entries(params)) {
    if (!isDriveName(k)) continue;
    const d = parseDrive(v);
    const fresh = /^([^/:\s]+):(\d+(?:\.\d+)?|cloudinit)$/.exec(d.volid);
    if (fresh && fresh[2] !== 'cloudinit') {
      r.check(`/storage/${fresh[1]}`, ['Datastore.AllocateSpace']);
      // storage_config: an unknown storage fails the request, before any task.
      try {
        storageFor(r.ctx(), fresh[1]);
      } catch (e) {
        if (e instanceof CliError) throw new ApiError(500, `${e.message}\n`);
        throw e;
      }
    }
    const from = /^([^/:\s]+):/.exec(d.opts['import-from'] ?? '');
    if (from) r.check(`/storage/${from[1]}`, ['Datastore.AllocateSpace', 'Datastore.Audit'], true);
  }
}

/** `skiplock` is root@pam's alone; an API token never is root@pam. */
function checkSkiplock(r: Req): void {
  if (r.params.skiplock === '1') throw paramExc({ skiplock: 'Only root may use this option.' });
}

function checkSshKeys(params: Record<string, string>): void {
  if (params.sshkeys === undefined) return;
  try {
    validateSshKeys(params.sshkeys);
  } catch (e) {
    if (e instanceof CliError) throw new ApiError(500, `${e.message}\n`);
    throw e;
  }
}

/** The config must be on the node of the path (PVE's request is proxied there). */
function requireVm(r: Req): void {
  loadVm(r.ctx(), Number(r.params.vmid));
}

function task(r: Req, type: string, job: TaskJob): string {
  return forkWorker(r.dir, { node: r.params.node, type, id: r.params.vmid ?? '', user: r.user }, job);
}

const qmTask = (r: Req, type: string, argv: string[]) => task(r, type, { op: 'qm', argv, faultArgv: ['qm', ...argv] });

/** The request's own parameters (not the path's) as `--key=value` for qm. */
function options(r: Req, ...skip: string[]): string[] {
  return Object.entries(r.params)
    .filter(([k]) => !['node', 'vmid', ...skip].includes(k))
    .map(([k, v]) => `--${k}=${v}`);
}

const CREATE_PROPS: Record<string, Prop> = {
  ...without(CREATE_DEF.props, 'vmid'),
  archive: { type: 'string', optional: true, maxLength: 255 },
  force: { type: 'boolean', optional: true },
};

const SET_PROPS: Record<string, Prop> = { ...without(SET_DEF.props, 'vmid'), background_delay: { type: 'integer', optional: true, minimum: 1, maximum: 30 } };

const power = (action: 'start' | 'stop' | 'shutdown' | 'reboot', props: Record<string, Prop>): Route => ({
  method: 'POST',
  path: `/nodes/{node}/qemu/{vmid}/status/${action}`,
  props,
  handle: (r) => {
    r.check(`/vms/${r.params.vmid}`, ['VM.PowerMgmt']);
    checkSkiplock(r);
    requireVm(r);
    const vmid = Number(r.params.vmid);
    if (action === 'reboot' && !vmProcess(r.dir, vmid)) throw new ApiError(500, `VM ${vmid} not running\n`);
    return qmTask(r, `qm${action}`, [action, r.params.vmid, ...options(r)]);
  },
});

const bool: Prop = { type: 'boolean', optional: true };
const timeout: Prop = { type: 'integer', optional: true, minimum: 0 };

export const qemuRoutes: Route[] = [
  {
    method: 'GET',
    path: '/nodes/{node}/qemu',
    props: { full: bool },
    handle: (r) =>
      guests(r.ctx())
        .filter((g) => g.node === r.params.node && r.can(`/vms/${g.vmid}`, ['VM.Audit']))
        .map((g) => {
          const { id, node, type, ...rest } = guestResource(g);
          void id, node, type;
          return rest;
        }),
  },
  {
    method: 'POST',
    path: '/nodes/{node}/qemu',
    props: { vmid: CREATE_DEF.props.vmid, ...CREATE_PROPS },
    handle: (r) => {
      const p = r.params;
      const vmid = p.vmid;
      checkSshKeys(p);
      if (p.archive !== undefined) throw new ApiError(501, 'sandbox: restore (archive) is not implemented\n');
      if (p.storage !== undefined) r.check(`/storage/${p.storage}`, ['Datastore.AllocateSpace']);
      if (p.start === '1') r.check(`/vms/${vmid}`, ['VM.PowerMgmt']);
      // create_vm: VM.Allocate on the VM (or its pool); PVE names no privilege here.
      const poolOk = p.pool !== undefined && r.can(`/pool/${p.pool}`, ['VM.Allocate']);
      if (!r.can(`/vms/${vmid}`, ['VM.Allocate']) && !poolOk) throw new ApiError(403, 'Permission check failed\n');
      checkConfigPerms(r, vmid, Object.keys(p).filter((k) => !['node', 'vmid', 'start', 'pool', 'storage', 'unique', 'force', 'archive'].includes(k)));
      checkStoragePerms(r, p);
      const owner = vmOwner(r.dir, Number(vmid));
      if (owner) throw new ApiError(500, `unable to create VM ${vmid} - VM ${vmid} already exists on node '${owner}'\n`);
      const params = Object.fromEntries(Object.entries(p).filter(([k]) => !['node', 'force'].includes(k)));
      return task(r, 'qmcreate', { op: 'create', params, faultArgv: ['qm', 'create', vmid] });
    },
  },
  {
    method: 'GET',
    path: '/nodes/{node}/qemu/{vmid}/config',
    props: { current: bool, snapshot: { type: 'string', optional: true } },
    handle: (r) => {
      r.check(`/vms/${r.params.vmid}`, ['VM.Audit']);
      return vmConfigView(r.ctx(), r.params.node, Number(r.params.vmid));
    },
  },
  ...(['POST', 'PUT'] as const).map(
    (method): Route => ({
      method,
      path: '/nodes/{node}/qemu/{vmid}/config',
      props: SET_PROPS,
      handle: (r) => {
        const p = r.params;
        if (p.skiplock === '1') checkSkiplock(r);
        const deleted = (p.delete ?? '').split(/[,;\s]+/).filter(Boolean);
        const keys = Object.keys(p).filter((k) => !['node', 'vmid', 'delete', 'revert', 'skiplock', 'force', 'digest', 'background_delay'].includes(k));
        checkConfigPerms(r, p.vmid, [...keys, ...deleted]);
        checkStoragePerms(r, p);
        checkSshKeys(p);
        if (keys.length === 0 && deleted.length === 0) throw new ApiError(500, 'no options specified\n');
        if (p.digest !== undefined) {
          // assert_if_modified: the change was made against this very config.
          const current = (vmConfigView(r.ctx(), p.node, Number(p.vmid)) as { digest: string }).digest;
          if (current !== p.digest) throw new ApiError(500, 'detected modified configuration - file changed by other user? Try again.\n');
        }
        const params = Object.fromEntries(Object.entries(p).filter(([k]) => !['node', 'background_delay'].includes(k)));
        if (method === 'PUT') {
          // update_vm: synchronous, answers null.
          updateVm(r.ctx(), params);
          return null;
        }
        requireVm(r);
        return task(r, 'qmconfig', { op: 'config', params, faultArgv: ['qm', 'set', p.vmid] });
      },
    }),
  ),
  {
    method: 'PUT',
    path: '/nodes/{node}/qemu/{vmid}/resize',
    props: without(RESIZE_DEF.props, 'vmid'),
    handle: (r) => {
      r.check(`/vms/${r.params.vmid}`, ['VM.Config.Disk']);
      checkSkiplock(r);
      const conf = loadVm(r.ctx(), Number(r.params.vmid));
      const disk = conf.props[r.params.disk];
      const storage = disk && /^([^:]+):/.exec(parseDrive(disk).volid)?.[1];
      if (storage) r.check(`/storage/${storage}`, ['Datastore.AllocateSpace']);
      const params = Object.fromEntries(Object.entries(r.params).filter(([k]) => k !== 'node'));
      return task(r, 'resize', { op: 'resize', params, faultArgv: ['qm', 'disk', 'resize', r.params.vmid, r.params.disk, r.params.size] });
    },
  },
  {
    method: 'POST',
    path: '/nodes/{node}/qemu/{vmid}/migrate',
    props: {
      target: { type: 'string', format: (v) => (/^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$/.test(v) ? undefined : 'value does not look like a valid node name') },
      online: bool,
      force: bool,
      'with-local-disks': bool,
      targetstorage: { type: 'string', optional: true },
      bwlimit: { type: 'integer', optional: true, minimum: 0 },
      migration_type: { type: 'string', optional: true, enum: ['secure', 'insecure'] },
      migration_network: { type: 'string', optional: true },
      'with-conntrack-state': bool,
    },
    handle: (r) => {
      const { node, vmid, target } = r.params;
      r.check(`/vms/${vmid}`, ['VM.Migrate']);
      const model = r.ctx().model;
      if (target === node) throw paramExc({ target: 'target is local node.' });
      const t = nodeOf(model, target);
      if (!t) throw new ApiError(500, `no such cluster node '${target}'\n`);
      if (!t.online) throw new ApiError(500, `node '${target}' seems to be offline\n`);
      const conf = loadVm(r.ctx(), Number(vmid));
      if (conf.props.lock) throw new ApiError(500, `VM is locked (${conf.props.lock})\n`);
      if (vmProcess(r.dir, Number(vmid)) && r.params.online !== '1') throw new ApiError(500, "can't migrate running VM without --online\n");
      return qmTask(r, 'qmigrate', ['migrate', vmid, target, ...options(r, 'target', 'with-conntrack-state')]);
    },
  },
  power('start', { skiplock: bool, timeout, machine: { type: 'string', optional: true }, 'force-cpu': { type: 'string', optional: true }, migratedfrom: { type: 'string', optional: true }, stateuri: { type: 'string', optional: true }, targetstorage: { type: 'string', optional: true } }),
  power('stop', { skiplock: bool, timeout, keepActive: bool, 'overrule-shutdown': bool, migratedfrom: { type: 'string', optional: true } }),
  power('shutdown', { skiplock: bool, timeout, keepActive: bool, forceStop: bool }),
  power('reboot', { timeout }),
  {
    method: 'GET',
    path: '/nodes/{node}/qemu/{vmid}/cloudinit/dump',
    props: { type: { type: 'string', enum: ['user', 'network', 'meta'] } },
    handle: (r) => {
      r.check(`/vms/${r.params.vmid}`, ['VM.Audit']);
      const lines: string[] = [];
      qmCloudinitDump(makeCtx(r.dir, r.params.node, { out: (l) => lines.push(l), err: () => undefined }), [r.params.vmid, r.params.type]);
      // The password hash only for who may configure cloud-init.
      const masked = r.can(`/vms/${r.params.vmid}`, ['VM.Config.Cloudinit']) ? lines : lines.map((l) => (/^password: /.test(l) ? 'password: **********' : l));
      return masked.join('\n') + '\n';
    },
  },
  {
    method: 'GET',
    path: '/nodes/{node}/qemu/{vmid}/status/current',
    handle: (r) => {
      r.check(`/vms/${r.params.vmid}`, ['VM.Audit']);
      return vmStatusCurrent(r.ctx(), r.params.node, Number(r.params.vmid));
    },
  },
  {
    method: 'DELETE',
    path: '/nodes/{node}/qemu/{vmid}',
    props: { purge: bool, skiplock: bool, 'destroy-unreferenced-disks': bool },
    handle: (r) => {
      const vmid = Number(r.params.vmid);
      r.check(`/vms/${vmid}`, ['VM.Allocate']);
      checkSkiplock(r);
      const conf = loadVm(r.ctx(), vmid);
      if (conf.props.protection === '1') throw new ApiError(500, `can't remove VM ${vmid} - protection mode enabled\n`);
      if (vmProcess(r.dir, vmid)) throw new ApiError(500, `VM ${vmid} is running - destroy failed\n`);
      return qmTask(r, 'qmdestroy', ['destroy', String(vmid), ...options(r)]);
    },
  },
];

