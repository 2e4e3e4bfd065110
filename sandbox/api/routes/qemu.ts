import type { Prop } from '../../cli/args';
import type { Req, Route } from '../http';
import { ApiError, paramExc } from '../errors';
import type { TaskJob } from '../tasks';
import { CREATE_DEF } from '../../cli/qm/create';
import { CLONE_DEF, checkClone } from '../../cli/qm/clone';
import { TEMPLATE_DEF } from '../../cli/qm/template';
import { SET_DEF, updateVm } from '../../cli/qm/set';
import { RESIZE_DEF } from '../../cli/qm/resize';
import { isDriveName } from '../../cli/vmOptions';
import { loadVm, parseDrive } from '../../cli/qm/vm';
import { guestResource, guests } from '../../cli/resources';
import { vmConfOn, vmConfigView, vmStatusCurrent } from '../../cli/pvesh';
import { vmOwner } from '../../state/vmlist';
import { parsePropertyString } from '../../state/vmconf';
import { poolExists, poolMissingText } from '../../state/pools';
import { vmProcess } from '../../state/runtime';
import { majorOf, nodeOf, nodePveVersion } from '../../state/model';
import { validateSshKeys } from '../../cli/qm/sshkeys';
import { CliError } from '../../cli/errors';
import { storageFor } from '../../cli/storage';
import { qmCloudinitDump } from '../../cli/qm/cloudinit';
import { makeCtx } from '../../cli/context';
import { agentFileRead } from '../../cli/agentFile';
import { agentNetworkInterfaces } from '../../cli/agentNetwork';

/**
 * /nodes/{node}/qemu: qemu-server's API2::Qemu for the calls the product makes. Checks that
 * PVE makes before it forks the worker answer the request itself (500 with the message);
 * the rest runs as a task with the CLIs' own code, on the node of the path.
 */

const without = (props: Record<string, Prop>, ...keys: string[]) => Object.fromEntries(Object.entries(props).filter(([k]) => !keys.includes(k)));

// qemu-server's option groups (API2/Qemu.pm, $cpuoptions … $cloudinitoptions): which
// privilege an option needs.
const CPU = ['cores', 'cpu', 'runningcpu', 'cpulimit', 'cpuunits', 'numa', 'smp', 'sockets', 'vcpus'];
const MEMORY = ['memory', 'balloon', 'shares', 'allow-ksm'];
const HWTYPE = ['acpi', 'hotplug', 'kvm', 'machine', 'runningmachine', 'scsihw', 'smbios1', 'tablet', 'vga', 'watchdog', 'audio0', 'rng0'];
const GENERAL = ['agent', 'autostart', 'bios', 'description', 'keyboard', 'localtime', 'migrate_downtime', 'migrate_speed', 'name', 'onboot', 'ostype', 'protection', 'reboot', 'startdate', 'startup', 'tdf', 'template'];
const DISK = ['boot', 'bootdisk', 'vmstatestorage'];
const CLOUDINIT = ['cicustom', 'cipassword', 'citype', 'ciuser', 'ciupgrade', 'nameserver', 'searchdomain', 'sshkeys'];

/**
 * qemu-server API2/Qemu.pm `$check_vm_modify_config_perm`, run by create_vm and
 * update_vm before anything else happens. Drives, serial ports (and usb, hostpci,
 * virtiofs) and tags are skipped: their privilege depends on the value and is checked
 * elsewhere (`checkDrivePerms`, `checkSerialPerm`).
 */
function checkConfigPerms(r: Req, vmid: string, keys: string[]): void {
  const vm = `/vms/${vmid}`;
  for (const k of keys) {
    if (isDriveName(k) || k === 'cdrom' || /^(?:unused|serial|usb|hostpci|virtiofs)\d+$/.test(k) || k === 'tags') continue;
    if (CPU.includes(k) || /^numa\d+$/.test(k)) r.check(vm, ['VM.Config.CPU']);
    else if (MEMORY.includes(k)) r.check(vm, ['VM.Config.Memory']);
    else if (HWTYPE.includes(k)) r.check(vm, ['VM.Config.HWType']);
    else if (GENERAL.includes(k)) {
      r.check(vm, ['VM.Config.Options']);
      if (k === 'startup') r.check('/', ['Sys.Modify']);
    } else if (k === 'freeze') r.check(vm, ['VM.PowerMgmt']);
    else if (DISK.includes(k)) r.check(vm, ['VM.Config.Disk']);
    else if (/^net\d+$/.test(k)) r.check(vm, ['VM.Config.Network']);
    else if (CLOUDINIT.includes(k) || /^ipconfig\d+$/.test(k)) r.check(vm, ['VM.Config.Cloudinit', 'VM.Config.Network'], true);
    else if (k === 'vmstate') r.check(vm, ['VM.Config.Disk', 'VM.PowerMgmt']);
    else throw new ApiError(500, `only root can set '${k}' config\n`);
  }
}

/**
 * A serial port: `socket` needs VM.Config.HWType, a host device is root@pam's alone
 * (API2/Qemu.pm `$check_vm_create_serial_perm` at create; update_vm's `serial\d+` branch,
 * which lets the socket pass only when the port it replaces was a socket too). An API
 * token is never root@pam (`$authuser eq 'root@pam'` compares the token id).
 */
function checkSerialPerm(r: Req, vmid: string, params: Record<string, string>, current?: Record<string, string>): void {
  for (const [k, v] of Object.entries(params)) {
    if (!/^serial\d+$/.test(k)) continue;
    if (v === 'socket' && (current?.[k] === undefined || current[k] === 'socket')) r.check(`/vms/${vmid}`, ['VM.Config.HWType']);
    else throw new ApiError(500, `only root can ${current ? 'modify' : 'set'} '${k}' config for real devices\n`);
  }
}

/** PVE::QemuServer::Drive::drive_is_cloudinit: `<storage>:cloudinit` or its allocated volume. */
const driveIsCloudinit = (value: string) => /[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|qcow2|vmdk|cow|qed|cloop))?$/.test(parseDrive(value).volid);

/**
 * update_vm's `$check_drive_perms` (qemu-server API2/Qemu.pm), for the drive replaced and
 * the drive set: a cloud-init drive needs both VM.Config.Cloudinit and VM.Config.CDROM, a
 * CD-ROM VM.Config.CDROM, any other disk VM.Config.Disk. create_vm checks none of these:
 * a new VM's disks need only Datastore.AllocateSpace (`$check_storage_access`).
 */
function checkDrivePerms(r: Req, vmid: string, value: string): void {
  const vm = `/vms/${vmid}`;
  if (driveIsCloudinit(value)) r.check(vm, ['VM.Config.Cloudinit', 'VM.Config.CDROM']);
  else if (parseDrive(value).opts.media === 'cdrom') r.check(vm, ['VM.Config.CDROM']);
  else r.check(vm, ['VM.Config.Disk']);
}

/**
 * PVE::QemuServer::check_bridge_access → PVE::GuestHelpers::check_vnet_access (pve-guest-
 * common): SDN.Use on the bridge in the `localnetwork` zone (a plain Linux bridge is no
 * SDN vnet), `/sdn/zones/localnetwork/<bridge>`, or with a VLAN tag (or trunks) on
 * `/sdn/zones/localnetwork/<bridge>/<tag>` (an ACL on the bridge covers its VLANs).
 */
function checkBridgeAccess(r: Req, params: Record<string, string>): void {
  for (const k of Object.keys(params).sort()) {
    if (!/^net\d+$/.test(k)) continue;
    const opts = Object.fromEntries(params[k].split(',').map((p) => [p.slice(0, p.indexOf('=') < 0 ? p.length : p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
    const bridge = opts.bridge;
    if (bridge === undefined) continue;
    const zone = `/sdn/zones/localnetwork/${bridge}`;
    if (opts.tag) r.check(`${zone}/${opts.tag}`, ['SDN.Use']);
    const trunks = opts.trunks ? trunkTags(opts.trunks) : [];
    for (const t of trunks) r.check(`${zone}/${t}`, ['SDN.Use']);
    if (!opts.tag && !opts.trunks) r.check(zone, ['SDN.Use']);
  }
}

/** PVE::GuestHelpers::get_tags_from_trunk: `10;20-22` → 10, 20, 21, 22, in sorted (string) order. */
function trunkTags(trunks: string): string[] {
  const tags = new Set<string>();
  for (const part of trunks.split(';')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) continue;
    for (let i = Number(m[1]); i <= Number(m[2] ?? m[1]); i++) tags.add(String(i));
  }
  return [...tags].sort();
}

/**
 * What update_vm's update function checks per option against the config it loaded
 * (qemu-server API2/Qemu.pm, `$updatefn`): for a drive deleted its value, for a drive set
 * the one it replaces and the new one (`$check_drive_perms`); serial ports by value; for
 * a network device replaced, SDN.Use on the bridge it leaves.
 */
function checkUpdatePerms(r: Req, vmid: string, keys: string[], deleted: string[]): void {
  const conf = loadVm(r.ctx(), Number(vmid)).props;
  for (const k of deleted) {
    const val = conf[k];
    if (val === undefined) continue;
    if (isDriveName(k)) checkDrivePerms(r, vmid, val);
    else if (/^serial\d+$/.test(k)) {
      if (val === 'socket') r.check(`/vms/${vmid}`, ['VM.Config.HWType']);
      else throw new ApiError(500, `only root can delete '${k}' config for real devices\n`);
    } else if (/^net\d+$/.test(k)) checkBridgeAccess(r, { [k]: val });
  }
  for (const k of keys) {
    const val = r.params[k];
    if (isDriveName(k)) {
      if (conf[k] !== undefined) checkDrivePerms(r, vmid, conf[k]);
      checkDrivePerms(r, vmid, val);
    } else if (/^serial\d+$/.test(k)) checkSerialPerm(r, vmid, { [k]: val }, conf);
    else if (/^net\d+$/.test(k) && conf[k] !== undefined) checkBridgeAccess(r, { [k]: conf[k] });
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

/** PVE::QemuServer::Drive's `valid_drive_names` order, in which `foreach_volume` visits a config's drives. */
const DRIVE_ORDER = ['ide', 'scsi', 'virtio', 'sata', 'efidisk', 'tpmstate'];
const driveRank = (k: string) => {
  const m = /^([a-z]+)(\d+)$/.exec(k)!;
  return DRIVE_ORDER.indexOf(m[1]) * 100 + Number(m[2]);
};

/**
 * What clone_vm's `$load_and_check` asks of the source's config (qemu-server
 * API2/Qemu.pm), in its order: `$check_storage_access_clone` (Datastore.AllocateSpace on
 * the storage of every disk, CD-ROMs and the cloud-init drive aside, or on the `storage` of
 * a full clone for each of them; on `vmstatestorage`; Sys.Console on `/` for the host's
 * CD-ROM drive), check_bridge_access (SDN.Use on every NIC's bridge), and on 9
 * `$check_cpu_model_access` (Mapping.Use on `/mapping/cpu/<name>` for a custom model,
 * qemu-server 9.1.15 on: commit "api: clone: enforce Mapping.Use on inherited custom CPU
 * model"; 8.4's clone_vm does not check the model).
 */
function checkCloneAccess(r: Req, conf: Record<string, string>): void {
  for (const k of Object.keys(conf).filter(isDriveName).sort((a, b) => driveRank(a) - driveRank(b))) {
    const d = parseDrive(conf[k]);
    if (!d.volid || d.volid === 'none') continue;
    if (d.opts.media === 'cdrom') {
      if (d.volid === 'cdrom') r.check('/', ['Sys.Console']);
      continue;
    }
    r.check(`/storage/${r.params.storage ?? d.volid.split(':')[0]}`, ['Datastore.AllocateSpace']);
  }
  if (conf.vmstatestorage !== undefined) r.check(`/storage/${conf.vmstatestorage}`, ['Datastore.AllocateSpace']);
  checkBridgeAccess(r, conf);
  const cputype = conf.cpu === undefined ? undefined : parsePropertyString(conf.cpu, 'cputype').cputype;
  if (cputype?.startsWith('custom-') && majorOf(nodePveVersion(r.ctx().model, r.params.node).release) >= 9) {
    r.check(`/mapping/cpu/${cputype.slice('custom-'.length)}`, ['Mapping.Use']);
  }
}

/**
 * The guest agent's permission check (qemu-server PVE/API2/Qemu/Agent.pm), on the node of
 * the path: any one of the privileges on the VM. 8 (stable-bookworm) asks `VM.Monitor`
 * for every command (`register_command`'s default, and `file-read`'s own); 9 asks the
 * command's `VM.GuestAgent.*` privilege or `VM.GuestAgent.Unrestricted`: `.Audit` for
 * the read-only ones (`$guest_agent_commands`: network-get-interfaces, get-osinfo, ping,
 * info, ...), `.FileRead` for `file-read`. RPCEnvironment `check_any` names them all,
 * `|`-separated, in its 403.
 */
export function agentPrivileges(release: string, command: 'file-read' | 'network-get-interfaces'): string[] {
  if (majorOf(release) < 9) return ['VM.Monitor'];
  return [command === 'file-read' ? 'VM.GuestAgent.FileRead' : 'VM.GuestAgent.Audit', 'VM.GuestAgent.Unrestricted'];
}

function checkAgentAccess(r: Req, command: 'file-read' | 'network-get-interfaces'): void {
  const privs = agentPrivileges(nodePveVersion(r.ctx().model, r.params.node).release, command);
  r.check(`/vms/${r.params.vmid}`, privs, privs.length > 1);
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
  return r.tasks.fork({ node: r.params.node, type, id: r.params.vmid ?? '', user: r.user }, job);
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
      // check_pool_exist comes first in create_vm (qemu-server API2/Qemu.pm).
      if (p.pool !== undefined && !poolExists(r.ctx().model, p.pool)) throw new ApiError(403, `${poolMissingText(p.pool)}\n`);
      checkSshKeys(p);
      if (p.archive !== undefined) throw new ApiError(501, 'sandbox: restore (archive) is not implemented\n');
      if (p.storage !== undefined) r.check(`/storage/${p.storage}`, ['Datastore.AllocateSpace']);
      if (p.start === '1') r.check(`/vms/${vmid}`, ['VM.PowerMgmt']);
      // create_vm: VM.Allocate on the VM (or its pool); PVE names no privilege here.
      const poolOk = p.pool !== undefined && r.can(`/pool/${p.pool}`, ['VM.Allocate']);
      if (!r.can(`/vms/${vmid}`, ['VM.Allocate']) && !poolOk) throw new ApiError(403, 'Permission check failed\n');
      // create_vm's order: storage access, config options, serial ports, bridges.
      checkStoragePerms(r, p);
      checkConfigPerms(r, vmid, Object.keys(p).filter((k) => !['node', 'vmid', 'start', 'pool', 'storage', 'unique', 'force', 'archive'].includes(k)));
      checkSerialPerm(r, vmid, p);
      checkBridgeAccess(r, p);
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
        // update_vm's order before its update function: options deleted, options set,
        // storage access, bridges.
        checkConfigPerms(r, p.vmid, deleted);
        checkConfigPerms(r, p.vmid, keys);
        checkStoragePerms(r, p);
        checkBridgeAccess(r, p);
        checkSshKeys(p);
        if (keys.length === 0 && deleted.length === 0) throw new ApiError(500, 'no options specified\n');
        // --digest is checked by update_vm once it holds the config (updateVm; in the task for POST).
        const params = Object.fromEntries(Object.entries(p).filter(([k]) => !['node', 'background_delay'].includes(k)));
        if (method === 'PUT') {
          // update_vm: synchronous, answers null.
          checkUpdatePerms(r, p.vmid, keys, deleted);
          updateVm(r.ctx(), params);
          return null;
        }
        requireVm(r);
        // In the task: its update function checks these once it holds the config.
        let denied: string | undefined;
        try {
          checkUpdatePerms(r, p.vmid, keys, deleted);
        } catch (e) {
          if (!(e instanceof ApiError)) throw e;
          denied = e.message;
        }
        return task(r, 'qmconfig', { op: 'config', params, faultArgv: ['qm', 'set', p.vmid], ...(denied ? { denied } : {}) });
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
  {
    // API2/Qemu.pm template: VM.Allocate; the checks answer the request, the work is a
    // qmtemplate task, which writes `template: 1` before it converts the disks and may fail
    // after it (templateVm).
    method: 'POST',
    path: '/nodes/{node}/qemu/{vmid}/template',
    props: { disk: TEMPLATE_DEF.props.disk },
    handle: (r) => {
      const vmid = Number(r.params.vmid);
      r.check(`/vms/${vmid}`, ['VM.Allocate']);
      const conf = loadVm(r.ctx(), vmid);
      if (conf.props.lock) throw new ApiError(500, `VM is locked (${conf.props.lock})\n`);
      if (conf.props.template === '1' && !r.params.disk) throw new ApiError(500, "you can't convert a template to a template\n");
      if (vmProcess(r.dir, vmid)) throw new ApiError(500, "you can't convert a VM to template if VM is running\n");
      const params = Object.fromEntries(Object.entries(r.params).filter(([k]) => k !== 'node'));
      return task(r, 'qmtemplate', { op: 'template', params, faultArgv: ['qm', 'template', String(vmid), ...options(r)] });
    },
  },
  {
    // API2/Qemu.pm clone_vm: VM.Clone on the source, VM.Allocate on the new VM or its pool;
    // the rest in `$load_and_check` (checkCloneAccess); its early checks answer the request.
    method: 'POST',
    path: '/nodes/{node}/qemu/{vmid}/clone',
    props: without(CLONE_DEF.props, 'vmid'),
    handle: (r) => {
      const { vmid, newid, pool } = r.params;
      r.check(`/vms/${vmid}`, ['VM.Clone']);
      if (!r.can(`/vms/${newid}`, ['VM.Allocate'])) {
        if (pool === undefined) r.check(`/vms/${newid}`, ['VM.Allocate']);
        else r.check(`/pool/${pool}`, ['VM.Allocate']);
      }
      checkClone(r.ctx(), r.params, (conf) => checkCloneAccess(r, conf));
      return qmTask(r, 'qmclone', ['clone', vmid, newid, ...options(r, 'newid')]);
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
    path: '/nodes/{node}/qemu/{vmid}/agent/file-read',
    props: { file: { type: 'string' } },
    handle: (r) => {
      checkAgentAccess(r, 'file-read');
      return agentFileRead(r.ctx(), r.params.node, Number(r.params.vmid), r.params.file);
    },
  },
  {
    // The same module, one endpoint per command: `{ result }` around qemu-ga's answer.
    method: 'GET',
    path: '/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces',
    handle: async (r) => {
      checkAgentAccess(r, 'network-get-interfaces');
      const ctx = r.ctx();
      return { result: await agentNetworkInterfaces(ctx, vmConfOn(ctx, r.params.node, Number(r.params.vmid)), Number(r.params.vmid)) };
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

