import { isMap, parseDocument, stringify } from 'yaml';

/**
 * A caller's cloud-init user-data (`userData`) and the document QemuRun hands
 * Proxmox as the `cicustom` user snippet. With `user=` set, qemu-server puts the snippet on
 * the NoCloud drive INSTEAD of what it would generate (Cloudinit.pm `generate_nocloud`), so
 * the snippet must carry what `cloudinit_userdata` would have written for the VM (its user,
 * password, keys, hostname) as well as what the caller asked for. Network-config stays
 * Proxmox's (ipconfig0, nameserver).
 *
 * Node.js only (the `yaml` package): the workflow bundle never loads it; the API checks a
 * body with it (a 400 naming `userData` or `userData.<key>`) and configureVm again before
 * anything reaches a node.
 */

/** The keys QemuRun writes itself: a caller's value would replace the install's account, its keys or its name. */
export const OWNED_KEYS: Readonly<Record<string, string>> = {
  user: 'the install\'s account is the request\'s "user"',
  users: 'the install\'s account is the request\'s "user"; create other accounts with runcmd',
  password: 'the password is the request\'s "passwd"',
  chpasswd: 'the password is the request\'s "passwd"',
  disable_root: 'root stays as the install\'s init script leaves it',
  hostname: 'the host name is the VM\'s name',
  fqdn: 'the host name is the VM\'s name (and dns.search)',
  manage_etc_hosts: 'QemuRun writes it as Proxmox does',
};

/** Lists QemuRun's own entries come first in (ssh_authorized_keys), or that the caller's are taken as they are. */
const LIST_KEYS = ['ssh_authorized_keys', 'packages', 'runcmd', 'bootcmd', 'write_files'] as const;

export class UserDataError extends Error {
  override readonly name = 'UserDataError';
  constructor(
    /** `userData` or `userData.<key>`. */
    readonly field: string,
    /** The rule broken, never the value. */
    readonly rule: string,
  ) {
    super(`${field}: ${rule}`);
  }
}

/**
 * The caller's document as a mapping, or a UserDataError naming the field. YAML errors are
 * told by line and column only: the text may hold secrets, and the answer may be logged.
 */
export function parseUserData(text: string): Record<string, unknown> {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const at = e.linePos?.[0] ? ` at line ${e.linePos[0].line}, column ${e.linePos[0].col}` : '';
    throw new UserDataError('userData', `is not valid YAML (${e.code}${at})`);
  }
  if (!isMap(doc.contents)) throw new UserDataError('userData', 'must be a YAML mapping after the #cloud-config line, like "packages: [curl]"');
  const map = expanded(doc);
  refuseMergeKeys(map, 'userData', new Set());
  for (const key of Object.keys(map)) {
    // Own keys only: `constructor` or `__proto__` is the caller's key, not a property of the table.
    if (Object.hasOwn(OWNED_KEYS, key)) throw new UserDataError(`userData.${key}`, `is set by QemuRun and cannot be given: ${OWNED_KEYS[key]}`);
  }
  for (const key of LIST_KEYS) {
    if (map[key] !== undefined && !Array.isArray(map[key])) throw new UserDataError(`userData.${key}`, 'must be a list');
  }
  for (const [i, k] of ((map.ssh_authorized_keys as unknown[] | undefined) ?? []).entries()) {
    if (typeof k !== 'string') throw new UserDataError(`userData.ssh_authorized_keys[${i}]`, 'must be a string');
  }
  for (const [i, f] of ((map.write_files as unknown[] | undefined) ?? []).entries()) {
    if (!f || typeof f !== 'object' || Array.isArray(f) || typeof (f as { path?: unknown }).path !== 'string') {
      throw new UserDataError(`userData.write_files[${i}]`, 'must be a mapping with a "path"');
    }
  }
  return map;
}

/** Aliases a document may expand: enough for anchors reused by hand, far from a billion laughs. */
const MAX_ALIAS_COUNT = 100;

/**
 * The document as plain values, aliases expanded. The `yaml` package stops an alias bomb by
 * throwing (a ReferenceError) past `maxAliasCount`: that is the caller's document, so a 400.
 */
function expanded(doc: ReturnType<typeof parseDocument>): Record<string, unknown> {
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT }) as Record<string, unknown>;
  } catch (err) {
    if (/alias/i.test((err as Error).message)) throw new UserDataError('userData', `expands too many YAML aliases (at most ${MAX_ALIAS_COUNT}): write the values out`);
    throw new UserDataError('userData', `cannot be read as YAML (${(err as Error).name})`);
  }
}

/**
 * cloud-init reads the snippet with PyYAML, a YAML 1.1 loader, for which a plain `<<` key
 * merges the mapping it names into its own; the `yaml` package (YAML 1.2) keeps it as a key
 * called `<<`. Left alone, `<<: {password: ...}` would pass the owned-key check and then set
 * the password on the guest; and the snippet is written back from the parsed values, where
 * even a quoted `"<<"` comes out plain. So no `<<` key is taken at any depth.
 */
function refuseMergeKeys(value: unknown, field: string, seen: Set<object>): void {
  if (value === null || typeof value !== 'object' || seen.has(value)) return;
  seen.add(value);
  if (Array.isArray(value)) {
    value.forEach((v, i) => refuseMergeKeys(v, `${field}[${i}]`, seen));
    return;
  }
  for (const [key, v] of Object.entries(value)) {
    if (key === '<<') throw new UserDataError(`${field}.<<`, 'merge keys are not accepted (cloud-init would merge them past these checks): write the keys out');
    refuseMergeKeys(v, `${field}.${key}`, seen);
  }
}

/** What qemu-server's `cloudinit_userdata` writes for the VM, as values (the sandbox's copy: sandbox/state/cloudinit.ts). */
export interface GeneratedUserData {
  /** The VM's name (`name` in its config). */
  hostname: string;
  /** `searchdomain`, which makes the fqdn `<name>.<search>`. */
  searchDomain?: string;
  user: string;
  /** A crypt hash, as Proxmox stores `cipassword`; absent: no usable password. */
  passwordHash?: string;
  keys: string[];
  /** `ciupgrade`: QemuRun sets 0, the init script upgrades. */
  packageUpgrade: boolean;
}

/**
 * The whole user-data snippet: `cloudinit_userdata`'s keys in its order, then the caller's,
 * their `ssh_authorized_keys` after QemuRun's (the service's key must stay, or the install
 * cannot reach the VM).
 */
export function mergedUserData(generated: GeneratedUserData, callerText: string): string {
  const caller = parseUserData(callerText);
  const fqdn = generated.hostname.includes('.') ? generated.hostname : generated.searchDomain ? `${generated.hostname}.${generated.searchDomain}` : generated.hostname;
  const ours: Record<string, unknown> = {
    hostname: generated.hostname.replace(/\..*$/, ''),
    manage_etc_hosts: true,
    fqdn,
    user: generated.user,
    ...(generated.passwordHash !== undefined ? { password: generated.passwordHash } : {}),
    ssh_authorized_keys: [...generated.keys, ...((caller.ssh_authorized_keys as string[] | undefined) ?? [])],
    chpasswd: { expire: false },
    users: ['default'],
    ...(generated.packageUpgrade ? { package_upgrade: true } : {}),
  };
  const { ssh_authorized_keys: _keys, ...rest } = caller;
  return `#cloud-config\n${stringify({ ...ours, ...rest }, { lineWidth: 0 })}`;
}

/** The snippet's file name on the snippets storage: one per VM, so destroy knows what to remove. */
export function userSnippetName(vmid: number): string {
  return `qemurun-${vmid}-user.yaml`;
}

/** The `cicustom` value naming it. */
export function cicustomOf(storage: string, vmid: number): string {
  return `user=${storage}:snippets/${userSnippetName(vmid)}`;
}

/** The volume of QemuRun's own user snippet in a VM's `cicustom`, or undefined (none, or someone else's). */
export function ownUserSnippet(cicustom: string | undefined, vmid: number): { storage: string; volid: string } | undefined {
  const user = cicustom
    ?.split(',')
    .map((p) => p.split('='))
    .find(([k]) => k === 'user')?.[1];
  const m = user ? /^([a-z][a-z0-9\-_.]*[a-z0-9]):snippets\/(.+)$/i.exec(user) : null;
  return m && m[2] === userSnippetName(vmid) ? { storage: m[1], volid: user! } : undefined;
}
