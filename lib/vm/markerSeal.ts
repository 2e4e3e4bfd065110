import crypto from 'node:crypto';
import { type InstallSpec, markerFields, type MarkerFields, notManagedMessage, parseSpecMarker, sealedText } from '../../contract';
import type { Config } from '../config';
import { resolveEncryptionKeys } from '../temporal/encryptionKeys';

/**
 * Seals the markers in a VM's description so that a Proxmox user who can edit the Notes
 * (`VM.Config.Options`) cannot make QemuRun destroy or rebuild a VM: HMAC-SHA256 over the
 * VMID, the owner workflow, its run and the spec, with a key only QemuRun holds.
 *
 * The key is derived from each payload-encryption key (HMAC of a fixed label), so there is
 * nothing new to distribute or back up, and it is not the encryption key itself. The seal
 * names the key id it was made with: after a rotation, markers sealed with an older key
 * stay valid while that key is kept among the decrypting ones.
 */

const LABEL = 'qemurun marker seal v1';
const SEAL = /^([A-Za-z0-9._-]{1,64}):([A-Za-z0-9_-]{43})$/;

export type MarkerCheck =
  | { sealed: true; fields: MarkerFields }
  /** `owner`: the owner marker as written, if there is one; `reason` says why it is not trusted. */
  | { sealed: false; owner?: string; reason: string };

export class MarkerSeal {
  private readonly macKeys: ReadonlyMap<string, Buffer>;

  constructor(
    keys: ReadonlyMap<string, Buffer>,
    private readonly sealWith: string,
  ) {
    this.macKeys = new Map([...keys].map(([id, key]) => [id, crypto.createHmac('sha256', key).update(LABEL).digest()]));
    if (!this.macKeys.has(sealWith)) throw new Error(`marker seal: key "${sealWith}" is not among the keys`);
  }

  /** The value of a `qemurun-seal=` line for these markers. */
  seal(fields: MarkerFields): string {
    return `${this.sealWith}:${this.mac(this.sealWith, fields)}`;
  }

  /** Whether the description's markers are sealed by this QemuRun for the VM `vmid`. */
  check(description: string | undefined, vmid: number): MarkerCheck {
    const { owner, fields, seal } = markerFields(description, vmid);
    const untrusted = (reason: string): MarkerCheck => ({ sealed: false, ...(owner !== undefined ? { owner } : {}), reason });
    if (!fields) return untrusted('its markers name no owner run (written by hand, or before markers were sealed)');
    const m = seal === undefined ? undefined : SEAL.exec(seal);
    if (!m) return untrusted('its markers carry no seal (written by hand, or before markers were sealed)');
    if (!this.macKeys.has(m[1])) return untrusted(`its markers are sealed with key "${m[1]}", which this QemuRun does not hold`);
    const expected = Buffer.from(this.mac(m[1], fields));
    if (!crypto.timingSafeEqual(expected, Buffer.from(m[2]))) {
      return untrusted(`its markers do not match their seal (edited, or copied from another VM than ${vmid})`);
    }
    return { sealed: true, fields };
  }

  private mac(keyId: string, fields: MarkerFields): string {
    return crypto.createHmac('sha256', this.macKeys.get(keyId)!).update(sealedText(fields)).digest('base64url');
  }
}

/**
 * Why a VM is outside the managed set, or undefined when it is in it. The set is the VMs
 * whose markers this QemuRun sealed: an owner line alone is what any Proxmox user with
 * `VM.Config.Options` can write into a foreign VM's Notes.
 */
export function unmanagedReason(check: MarkerCheck): string | undefined {
  if (check.sealed) return undefined;
  if (check.owner === undefined) return 'its description has no qemurun-owner marker';
  return `its qemurun-owner marker is not trusted: ${check.reason}`;
}

/**
 * The refusal of an operation on a VM outside the managed set, in the words the API (409)
 * and the activities (NotManagedError) both give; undefined when the VM is in the set, or
 * when MANAGE_ALL_VMS opens every VM.
 */
export function notManagedRefusal(
  config: Pick<Config, 'encryption' | 'dataDir' | 'manageAllVms'>,
  vmid: number,
  conf: { description?: string; name?: string } | undefined,
): string | undefined {
  if (config.manageAllVms) return undefined;
  const reason = unmanagedReason(markerSealFor(config).check(conf?.description, vmid));
  return reason === undefined ? undefined : notManagedMessage(vmid, conf?.name, reason);
}

/** The spec of sealed markers, if they hold one (still to be checked like any request). */
export function sealedSpec(check: MarkerCheck): InstallSpec | undefined {
  return check.sealed ? parseSpecMarker(check.fields.spec) : undefined;
}

// eslint-disable-next-line no-restricted-syntax -- keyed by the marker object itself: nothing else reaches an entry
const seals = new WeakMap<object, MarkerSeal>();

/**
 * The seal of this service's keys (ENCRYPTION_KEYS, ENCRYPTION_KEY_FILE or the key file in
 * DATA_DIR, as the payload codec reads them), made once per configuration.
 */
export function markerSealFor(config: Pick<Config, 'encryption' | 'dataDir'>): MarkerSeal {
  let seal = seals.get(config);
  if (!seal) {
    const keys = resolveEncryptionKeys({ ...config.encryption, dataDir: config.dataDir });
    seal = new MarkerSeal(keys.keys, keys.encryptWith);
    seals.set(config, seal);
  }
  return seal;
}
