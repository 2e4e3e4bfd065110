import crypto from 'node:crypto';
import { type InstallSpec, markerFields, type MarkerFields, notManagedMessage, parseSpecMarker, PENDING_INSTANCE, sealedText } from '../../contract';
import type { Config } from '../config';
import { resolveEncryptionKeys } from '../temporal/encryptionKeys';
import { vmInstanceOf } from '../proxmox/vmInstance';
import type { VmConfig } from '../proxmox/vmConfig';
import { markersResealed } from '../stateFiles';

/**
 * Seals the markers in a VM's description so that a Proxmox user who can edit the Notes
 * (`VM.Config.Options`) cannot make QemuRun destroy or rebuild a VM: HMAC-SHA256 over the
 * VMID, the VM instance (its SMBIOS uuid), the owner workflow, its run and the spec, with a
 * key only QemuRun holds. The instance is what makes markers of a destroyed VM worthless on a
 * later VM at the same VMID: Proxmox gives every new VM a fresh uuid.
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

/** What a seal is checked against: the VM's config as read (its description and its smbios1). */
export type SealedVm = { description?: string; entries?: VmConfig['entries'] };

export class MarkerSeal {
  private readonly macKeys: ReadonlyMap<string, Buffer>;

  /**
   * `legacyAccepted`: whether markers sealed before seals named the instance still count. They
   * do until this service resealed its VMs with their instance (lib/vm/reseal.ts); after that,
   * such markers can only have come from elsewhere, a destroyed VM's Notes for one.
   */
  constructor(
    keys: ReadonlyMap<string, Buffer>,
    private readonly sealWith: string,
    private readonly legacyAccepted: () => boolean = () => false,
  ) {
    this.macKeys = new Map([...keys].map(([id, key]) => [id, crypto.createHmac('sha256', key).update(LABEL).digest()]));
    if (!this.macKeys.has(sealWith)) throw new Error(`marker seal: key "${sealWith}" is not among the keys`);
  }

  /** The value of a `qemurun-seal=` line for these markers. */
  seal(fields: MarkerFields): string {
    return `${this.sealWith}:${this.mac(this.sealWith, fields)}`;
  }

  /**
   * Whether the VM's markers are sealed by this QemuRun for this very VM: the VM `vmid`, and
   * the instance its smbios1 names now. `acceptPending`: markers sealed before the VM's uuid was
   * known (a clone's, PENDING_INSTANCE) count too; only the run that wrote them may ask so.
   * `acceptLegacy`: markers without the instance count whatever `legacyAccepted` says; only the
   * reseal pass asks so, to find them.
   */
  check(vm: SealedVm | undefined, vmid: number, opts: { acceptPending?: boolean; acceptLegacy?: boolean } = {}): MarkerCheck {
    const { owner, fields, seal } = markerFields(vm?.description, vmid);
    const untrusted = (reason: string): MarkerCheck => ({ sealed: false, ...(owner !== undefined ? { owner } : {}), reason });
    if (!fields) return untrusted('its markers name no owner run (written by hand, or before markers were sealed)');
    const m = seal === undefined ? undefined : SEAL.exec(seal);
    if (!m) return untrusted('its markers carry no seal (written by hand, or before markers were sealed)');
    if (!this.macKeys.has(m[1])) return untrusted(`its markers are sealed with key "${m[1]}", which this QemuRun does not hold`);
    const expected = Buffer.from(this.mac(m[1], fields));
    if (!crypto.timingSafeEqual(expected, Buffer.from(m[2]))) {
      return untrusted(`its markers do not match their seal (edited, or copied from another VM than ${vmid})`);
    }
    if (fields.instance === undefined) {
      if (opts.acceptLegacy || this.legacyAccepted()) return { sealed: true, fields };
      return untrusted('its markers were sealed in the form without the VM instance, which this QemuRun refuses since it resealed its VMs (copied from a destroyed VM, or missed by the reseal)');
    }
    if (fields.instance === PENDING_INSTANCE) {
      return opts.acceptPending ? { sealed: true, fields } : untrusted('its markers were sealed before its VM instance was known (a clone whose install did not finish)');
    }
    const now = vm?.entries ? vmInstanceOf({ entries: vm.entries }) : undefined;
    if (now === undefined) {
      // smbios1 deleted by hand: nothing tells this VM from a later one at its VMID.
      return untrusted(`its markers are sealed for SMBIOS uuid ${fields.instance}, and this VM has none (smbios1 was removed)`);
    }
    if (now !== fields.instance) {
      return untrusted(`its markers were copied from another VM instance (sealed for SMBIOS uuid ${fields.instance}, this VM's is ${now})`);
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
  conf: (SealedVm & { name?: string }) | undefined,
): string | undefined {
  if (config.manageAllVms) return undefined;
  const reason = unmanagedReason(markerSealFor(config).check(conf, vmid));
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
 * DATA_DIR, as the payload codec reads them), made once per configuration. Markers of the form
 * without the instance count until DATA_DIR records the reseal; that record is never removed,
 * so once seen it is not read again.
 */
export function markerSealFor(config: Pick<Config, 'encryption' | 'dataDir'>): MarkerSeal {
  let seal = seals.get(config);
  if (!seal) {
    const keys = resolveEncryptionKeys({ ...config.encryption, dataDir: config.dataDir });
    let resealed = false;
    seal = new MarkerSeal(keys.keys, keys.encryptWith, () => !(resealed ||= markersResealed(config.dataDir)));
    seals.set(config, seal);
  }
  return seal;
}
