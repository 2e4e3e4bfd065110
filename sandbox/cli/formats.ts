import { parseBoolean } from './args';
import { parsePropertyString } from '../state/vmconf';

/**
 * Format checks of qemu-server's option schema (QemuServer.pm, JSONSchema.pm), returning
 * the same error texts. Only the formats of options the sandbox accepts are here.
 */

const dnsLabel = '([a-zA-Z0-9]([a-zA-Z0-9\\-]*[a-zA-Z0-9])?)';
const DNS_NAME = new RegExp(`^(${dnsLabel}\\.)*${dnsLabel}$`);

export const vmidFormat = (v: string) => (/^[1-9][0-9]{2,8}$/.test(v) ? undefined : 'value does not look like a valid VM ID');

export const dnsName = (v: string) => (DNS_NAME.test(v) ? undefined : 'value does not look like a valid DNS name');

export const nodeName = (v: string) =>
  /^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$/.test(v) ? undefined : 'value does not look like a valid node name';

export const storageId = (v: string) =>
  /^[a-z][a-z0-9\-_.]*[a-z0-9]$/i.test(v) ? undefined : `storage ID '${v}' contains illegal characters`;

function isIpv4(v: string): boolean {
  const parts = v.split('.');
  return parts.length === 4 && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255);
}

function isIpv4Cidr(v: string): boolean {
  const m = /^(.+)\/(\d{1,2})$/.exec(v);
  return !!m && isIpv4(m[1]) && Number(m[2]) <= 32;
}

const isIpv6 = (v: string) => /^[0-9a-fA-F:]+(\/\d{1,3})?$/.test(v) && v.includes(':');

/** `pve-qm-ipconfig`: ip=dhcp|CIDR, gw=IPv4, ip6=auto|dhcp|CIDR, gw6=IPv6. */
export function ipconfig(v: string): Record<string, string> | undefined {
  const errors: Record<string, string> = {};
  const props = parsePropertyString(v);
  for (const [k, val] of Object.entries(props)) {
    if (k === 'ip' && val !== 'dhcp' && !isIpv4Cidr(val)) errors.ip = 'invalid format - value does not look like a valid ipv4 network configuration';
    else if (k === 'gw' && !isIpv4(val)) errors.gw = 'invalid format - value does not look like a valid IPv4 address';
    else if (k === 'ip6' && !['auto', 'dhcp'].includes(val) && !isIpv6(val)) errors.ip6 = 'invalid format - value does not look like a valid ipv6 network configuration';
    else if (k === 'gw6' && !isIpv6(val)) errors.gw6 = 'invalid format - value does not look like a valid IPv6 address';
    else if (!['ip', 'gw', 'ip6', 'gw6'].includes(k)) errors[k] = `invalid format - property is not defined in schema and the schema does not allow additional properties`;
  }
  return Object.keys(errors).length ? errors : undefined;
}

export const CPU_MODELS = [
  '486', 'athlon', 'Broadwell', 'Broadwell-IBRS', 'Broadwell-noTSX', 'Broadwell-noTSX-IBRS', 'Cascadelake-Server',
  'Conroe', 'core2duo', 'coreduo', 'EPYC', 'EPYC-IBPB', 'EPYC-Milan', 'EPYC-Rome', 'EPYC-Genoa', 'Haswell',
  'Haswell-IBRS', 'Haswell-noTSX', 'Haswell-noTSX-IBRS', 'host', 'Icelake-Server', 'IvyBridge', 'IvyBridge-IBRS',
  'kvm32', 'kvm64', 'max', 'Nehalem', 'Nehalem-IBRS', 'Opteron_G1', 'Opteron_G2', 'Opteron_G3', 'Opteron_G4',
  'Opteron_G5', 'Penryn', 'pentium', 'pentium2', 'pentium3', 'phenom', 'qemu32', 'qemu64', 'SandyBridge',
  'SandyBridge-IBRS', 'SapphireRapids', 'Skylake-Client', 'Skylake-Client-IBRS', 'Skylake-Server',
  'Skylake-Server-IBRS', 'Westmere', 'Westmere-IBRS', 'x86-64-v2', 'x86-64-v2-AES', 'x86-64-v3', 'x86-64-v4',
];

/** `pve-vm-cpu-conf`: `[cputype=]<model>[,flags=+aes;-pcid][,hidden=1]...`. */
export function cpuConf(v: string): string | undefined {
  const props = parsePropertyString(v, 'cputype');
  const model = props.cputype;
  if (!model) return 'format error';
  if (!CPU_MODELS.includes(model) && !model.startsWith('custom-')) {
    return `Built-in cputype '${model}' is not defined (missing 'custom-' prefix?)`;
  }
  return undefined;
}

/** `pve-qga`: `[enabled=]<1|0>[,fstrim_cloned_disks=<1|0>][,freeze-fs-on-backup=<1|0>][,type=<virtio|isa>]`. */
export function agent(v: string): Record<string, string> | undefined {
  const errors: Record<string, string> = {};
  // pve-common PVE/JSONSchema.pm `parse_property_string`: a `key=value` boolean goes
  // through parse_boolean (`enabled=yes` is 1), the default key's bare value does not
  // (`agent: yes` fails the type check).
  const bare = /^[^=,]+(?:,|$)/.test(v);
  for (const [k, val] of Object.entries(parsePropertyString(v, 'enabled'))) {
    if (['enabled', 'fstrim_cloned_disks', 'freeze-fs-on-backup', 'freeze-fs'].includes(k)) {
      const parsed = k === 'enabled' && bare ? val : (parseBoolean(val) ?? val);
      if (!['0', '1'].includes(parsed)) errors[k] = `invalid format - type check ('boolean') failed - got '${val}'`;
    } else if (k === 'type') {
      if (!['virtio', 'isa'].includes(val)) errors[k] = `invalid format - value '${val}' does not have a value in the enumeration 'virtio, isa'`;
    } else {
      errors[k] = 'invalid format - property is not defined in schema and the schema does not allow additional properties';
    }
  }
  return Object.keys(errors).length ? errors : undefined;
}

/** The keys of qemu-server's `$smbios1_fmt` whose values are base64 (its pattern, anchored as JSONSchema anchors every pattern). */
const SMBIOS1_BASE64_KEYS = ['version', 'serial', 'manufacturer', 'product', 'sku', 'family'];

/**
 * `pve-qm-smbios1`: `[uuid=<UUID>][,base64=<1|0>][,family=<b64>]...`, as parse_property_string
 * and check_object judge it: no default key, an unknown or repeated key ends the parse; then
 * `uuid` must match `[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}` whole, the text
 * keys base64, `base64` a boolean. qemu-server keeps a uuid it is given (create_vm adds one
 * only when smbios1 is absent).
 */
export function smbios1(v: string): string | Record<string, string> | undefined {
  const props: Record<string, string> = {};
  for (const part of v.split(',')) {
    if (/^\s*$/.test(part)) continue;
    const m = /^([^=]+)=(.+)$/.exec(part);
    if (!m) return part.includes('=') ? 'missing key in comma-separated list property' : 'value without key, but schema does not define a default key';
    const [, k, val] = m;
    if (props[k] !== undefined) return `duplicate key in comma-separated list property: ${k}`;
    if (k !== 'uuid' && k !== 'base64' && !SMBIOS1_BASE64_KEYS.includes(k)) return `invalid key in comma-separated list property: ${k}`;
    props[k] = val;
  }
  const errors: Record<string, string> = {};
  for (const [k, val] of Object.entries(props)) {
    if (k === 'uuid' && !/^[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}$/.test(val)) errors[k] = 'value does not match the regex pattern';
    else if (k === 'base64' && parseBoolean(val) === undefined) errors[k] = `type check ('boolean') failed - got '${val}'`;
    else if (SMBIOS1_BASE64_KEYS.includes(k) && !/^[A-Za-z0-9+/]+={0,2}$/.test(val)) errors[k] = 'value does not match the regex pattern';
  }
  return Object.keys(errors).length ? errors : undefined;
}

const NIC_MODELS = ['e1000', 'e1000-82540em', 'e1000-82544gc', 'e1000-82545em', 'e1000e', 'i82551', 'i82557b', 'i82559er', 'ne2k_isa', 'ne2k_pci', 'pcnet', 'rtl8139', 'virtio', 'vmxnet3'];

/** The keys of qemu-server's `$net_fmt` (QemuServer/Network.pm) besides the model aliases. */
const NET_KEYS = ['model', 'macaddr', 'bridge', 'tag', 'trunks', 'queues', 'rate', 'firewall', 'link_down', 'mtu'];

/** check_prop's integer checks, in its words. */
function integerIn(val: string, min: number, max: number): string | undefined {
  if (!/^-?\d+$/.test(val)) return `type check ('integer') failed - got '${val}'`;
  if (Number(val) > max) return `value must have a maximum value of ${max}`;
  if (Number(val) < min) return `value must have a minimum value of ${min}`;
  return undefined;
}

/**
 * `pve-qm-net`: `<model>[=<mac>],bridge=<br>[,firewall=1][,tag=N][,mtu=N]...`, as
 * parse_property_string and check_object judge it: an unknown key ends the parse
 * (`invalid key in comma-separated list property: k`); then each key is checked, `bridge`
 * by pve-bridge-id (`^[-_.\w\d]+$`), `tag` 1..4094 and `mtu` 1..65520, their errors under
 * `net0.<key>`. Whether the bridge exists is not checked (create and set do not).
 */
export function net(v: string): string | Record<string, string> | undefined {
  const first = v.split(',')[0];
  const [model, mac] = first.split('=');
  const knownModel = NIC_MODELS.includes(model) || model === 'model';
  if (!knownModel) return 'format error';
  if (model !== 'model' && mac !== undefined && !/^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$/.test(mac)) return 'format error';
  const props: Record<string, string> = {};
  for (const part of v.split(',').slice(1)) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0 || eq === part.length - 1) return 'missing key in comma-separated list property';
    const k = part.slice(0, eq);
    if (props[k] !== undefined) return `duplicate key in comma-separated list property: ${k}`;
    if (!NET_KEYS.includes(k) && !NIC_MODELS.includes(k)) return `invalid key in comma-separated list property: ${k}`;
    props[k] = part.slice(eq + 1);
  }
  const errors: Record<string, string> = {};
  if (props.bridge !== undefined && !/^[-_.\w\d]+$/.test(props.bridge)) errors.bridge = `invalid format - invalid bridge ID '${props.bridge}'`;
  const tag = props.tag === undefined ? undefined : integerIn(props.tag, 1, 4094);
  if (tag) errors.tag = tag;
  const mtu = props.mtu === undefined ? undefined : integerIn(props.mtu, 1, 65520);
  if (mtu) errors.mtu = mtu;
  return Object.keys(errors).length ? errors : undefined;
}

/**
 * `address-list` (pve-common pve_verify_address_list): split_list's items (on `,`, `;` and
 * spaces), each an IP address or a DNS name.
 */
export function addressList(v: string): string | undefined {
  for (const addr of v.replace(/[,;]/g, ' ').trim().split(/\s+/)) {
    if (isIpv4(addr) || isIpv6(addr) || DNS_NAME.test(addr)) continue;
    return `value does not look like a valid address: ${addr}`;
  }
  return undefined;
}

/** `serial0`: `socket` or a host device path. */
export const serial = (v: string) => (v === 'socket' || /^\/dev\/.+$/.test(v) ? undefined : 'value does not match the regex pattern');

/** Tags: `pve-tag-list`, split on `;`, `,` or spaces. */
export function tagList(v: string): string | undefined {
  for (const tag of v.split(/[;,\s]+/).filter(Boolean)) {
    if (!/^[a-z0-9_][a-z0-9_\-+.]*$/i.test(tag)) return 'invalid characters in tag';
  }
  return undefined;
}

/** `qm resize` sizes: `\+?\d+(\.\d+)?[KMGT]?`. */
export const DISK_SIZE = /^\+?\d+(\.\d+)?[KMGT]?$/;

const MACHINE_TYPE = /^(pc|pc(-i440fx)?-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|q35|pc-q35-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|virt(?:-\d+(\.\d+)+)?(\+pve\d+)?)$/;

/**
 * `machine` (qemu-server QemuServer/Machine.pm `$machine_fmt`): `[type=]<type>` plus
 * `viommu`, `aw-bits`, `enable-s3`, `enable-s4`, with JSONSchema.pm's texts.
 */
export function machine(v: string): Record<string, string> | undefined {
  const errors: Record<string, string> = {};
  for (const [k, val] of Object.entries(parsePropertyString(v, 'type'))) {
    if (k === 'type') {
      if (val.length > 40) errors.type = 'value may only be 40 characters long';
      else if (!MACHINE_TYPE.test(val)) errors.type = 'value does not match the regex pattern';
    } else if (k === 'viommu') {
      if (!['intel', 'virtio'].includes(val)) errors.viommu = `value '${val}' does not have a value in the enumeration 'intel, virtio'`;
    } else if (k === 'aw-bits') {
      if (!/^\d+$/.test(val)) errors['aw-bits'] = `type check ('integer') failed - got '${val}'`;
    } else if (k === 'enable-s3' || k === 'enable-s4') {
      if (parseBoolean(val) === undefined) errors[k] = `type check ('boolean') failed - got '${val}'`;
    } else errors[k] = `invalid key in comma-separated list property: ${k}`;
  }
  return Object.keys(errors).length ? errors : undefined;
}

/**
 * `pve-qm-cicustom` (qemu-server `$cicustom_fmt`): `[meta=<volume>][,network=<volume>]
 * [,user=<volume>][,vendor=<volume>]`, each a `pve-volume-id` (pve-storage
 * `parse_volume_id`). Whether the volume exists is not asked here: `qm start` reads it.
 */
export function cicustom(v: string): string | Record<string, string> | undefined {
  const props: Record<string, string> = {};
  for (const part of v.split(',')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    if (eq < 0) return 'value without key, but schema does not define a default key';
    if (eq === 0 || eq === part.length - 1) return 'missing key in comma-separated list property';
    const k = part.slice(0, eq);
    if (props[k] !== undefined) return `duplicate key in comma-separated list property: ${k}`;
    if (!['meta', 'network', 'user', 'vendor'].includes(k)) return `invalid key in comma-separated list property: ${k}`;
    props[k] = part.slice(eq + 1);
  }
  const errors: Record<string, string> = {};
  for (const [k, volid] of Object.entries(props)) {
    if (!/^[a-z][a-z0-9\-_.]*[a-z0-9]:.+$/is.test(volid)) errors[k] = `invalid format - unable to parse volume ID '${volid}'`;
  }
  return Object.keys(errors).length ? errors : undefined;
}
