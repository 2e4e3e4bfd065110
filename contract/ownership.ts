import { renameLegacySpecFields } from './inputs';
import type { InstallSpec } from './types';
import type { TemplateMarker } from './templates';

/**
 * Markers the product writes into a VM's description (Proxmox keeps it in the VM config,
 * so it travels with migrations and is visible in the Proxmox UI's Notes). The owner
 * marker is what cleanup checks before destroying anything; the spec marker is what a
 * rebuild re-creates the VM from. Neither holds a secret.
 *
 * Anyone with `VM.Config.Options` on a VM can write its description, so the markers carry
 * a seal: `qemurun-seal=<key id>:<HMAC>` over the VMID, the VM instance (its SMBIOS uuid,
 * `qemurun-instance=`), the owner, the owner's run and the spec (lib/vm/markerSeal.ts
 * computes it; workflow code never does). Destructive decisions (reconcile, rebuild,
 * cleanup) trust only sealed markers.
 */

const OWNER = 'qemurun-owner=';
const RUN = 'qemurun-run=';
const SPEC = 'qemurun-spec=';
const ADOPTED = 'qemurun-adopted=';
const SEAL = 'qemurun-seal=';
const TEMPLATE = 'qemurun-template=';
const INSTANCE = 'qemurun-instance=';

/**
 * The instance a clone's markers name until the clone's own uuid is known: `qm clone` takes
 * no smbios1 and writes a fresh uuid, so the install seals the markers again once it read it.
 * No VM has this uuid, so such markers never put a VM in the managed set.
 */
export const PENDING_INSTANCE = 'pending';

/** What a seal covers: every marker a destructive decision reads, and the VM they are about. */
export interface MarkerFields {
  vmid: number;
  /**
   * The VM instance the markers were sealed for: its SMBIOS uuid (lib/proxmox/vmInstance.ts),
   * or PENDING_INSTANCE. Absent in markers sealed before seals named the instance.
   */
  instance?: string;
  owner: string;
  /** The run of `owner` that wrote the markers: a later run under the same id is not the owner. */
  run: string;
  /** The spec marker's value as written (base64url JSON), if any. */
  spec?: string;
  /** The adoption line's value, if any. */
  adopted?: string;
  /** A template's `qemurun-template=` value (base64url JSON, TemplateMarker), if any. */
  template?: string;
}

/** The text a seal is the HMAC of: one field a line, none of which can hold a newline. */
export function sealedText(f: MarkerFields): string {
  // The version tag says which form was sealed, so one form's seal never verifies as the other.
  if (f.instance !== undefined) {
    return ['qemurun-markers/2', String(f.vmid), f.instance, f.owner, f.run, f.spec ?? '', f.adopted ?? '', f.template ?? ''].join('\n');
  }
  // A template's marker is a line more: the text of every seal made before templates stays the same.
  return ['qemurun-markers/1', String(f.vmid), f.owner, f.run, f.spec ?? '', f.adopted ?? '', ...(f.template !== undefined ? [f.template] : [])].join('\n');
}

/** The markers of a description as written, sealed or not (`vmid` is the VM's own). */
export function markerFields(description: string | undefined, vmid: number): { owner?: string; fields?: MarkerFields; seal?: string } {
  const owner = ownerOf(description);
  const run = markerValue(description, RUN);
  const seal = markerValue(description, SEAL);
  if (owner === undefined || run === undefined) return { owner, seal };
  const spec = markerValue(description, SPEC);
  const adopted = adoptionOf(description);
  const template = markerValue(description, TEMPLATE);
  const instance = markerValue(description, INSTANCE);
  return {
    owner,
    fields: { vmid, ...(instance !== undefined ? { instance } : {}), owner, run, ...(spec !== undefined ? { spec } : {}), ...(adopted !== undefined ? { adopted } : {}), ...(template !== undefined ? { template } : {}) },
    seal,
  };
}

/**
 * The description of a VM an install creates: owner, run, spec, and their seal, then the
 * operator's text (the spec's `description`, which the spec marker holds too, so a rebuild
 * writes it again). The markers come first and are read only up to the seal line
 * (markerLines), so a text holding lines like `qemurun-owner=…` or `qemurun-adopted=…`
 * neither forges a marker nor adds one the seal does not cover.
 */
export function installedDescription(f: { instance?: string; owner: string; run: string; spec: string; template?: string }, seal: string, text?: string): string {
  const template = f.template !== undefined ? `${TEMPLATE}${f.template}\n` : '';
  const instance = f.instance !== undefined ? `${INSTANCE}${f.instance}\n` : '';
  return `${OWNER}${f.owner}\n${RUN}${f.run}\n${instance}${SPEC}${f.spec}\n${template}${SEAL}${seal}${text ? `\n${text}` : ''}`;
}

/**
 * A description whose markers, sealed in the form without the instance, are sealed again for
 * it: the instance line goes just before the seal line (so it is inside the block markerLines
 * reads), the seal line gets `seal`, every other line stays as written.
 */
export function withInstanceSealed(description: string, instance: string, seal: string): string {
  const lines = description.split('\n');
  const at = lines.findIndex((l) => l.trim().startsWith(SEAL));
  if (at < 0) throw new Error('withInstanceSealed: the description has no seal line');
  return [...lines.slice(0, at), `${INSTANCE}${instance}`, `${SEAL}${seal}`, ...lines.slice(at + 1)].join('\n');
}

/** A template marker's value as written into a description. */
export function templateMarkerValue(marker: TemplateMarker): string {
  return Buffer.from(JSON.stringify(marker)).toString('base64url');
}

/** The template marker of sealed fields (MarkerSeal.check's), unchecked: undefined when there is none or it does not parse. */
export function parseTemplateMarker(v: string | undefined): TemplateMarker | undefined {
  if (!v) return undefined;
  try {
    const m = JSON.parse(Buffer.from(v, 'base64url').toString('utf8')) as TemplateMarker;
    return typeof m === 'object' && m !== null && typeof m.os === 'string' && typeof m.recipe === 'string' ? m : undefined;
  } catch {
    return undefined;
  }
}

/** What Proxmox stores of a description at most (qemu-server `description`, `maxLength => 1024 * 8`). */
export const PROXMOX_DESCRIPTION_MAX = 8192;

/**
 * By how many characters the description an install writes for this spec would pass
 * Proxmox's limit (0: it fits), with the longest owner, run and seal QemuRun writes: a
 * workflow id of up to 255 characters (install ids are 44, a rebuild's install longer), a
 * run id (a UUID) and a seal of a 64-character key id. Counted in UTF-8 bytes, never fewer
 * than Proxmox's characters.
 */
export function installedDescriptionOverflow(spec: InstallSpec): number {
  const longest = installedDescription({ instance: 'u'.repeat(36), owner: 'o'.repeat(255), run: 'r'.repeat(36), spec: specMarkerValue(spec) }, `${'k'.repeat(64)}:${'m'.repeat(43)}`, spec.description);
  return Math.max(0, Buffer.byteLength(longest, 'utf8') - PROXMOX_DESCRIPTION_MAX);
}

function ownerMarker(workflowId: string): string {
  return `${OWNER}${workflowId}`;
}

export function specMarkerValue(spec: InstallSpec): string {
  return Buffer.from(JSON.stringify(spec)).toString('base64url');
}

function markerValue(description: string | undefined, prefix: string): string | undefined {
  return markerLines(description)
    .find((l) => l.startsWith(prefix))
    ?.slice(prefix.length);
}

/**
 * The lines markers are read from: up to the first seal line, which closes every block of
 * markers QemuRun writes; what follows it is the operator's text (installedDescription).
 * A description without a seal line (unsealed markers, written by hand or before sealing)
 * is read whole, as before.
 */
function markerLines(description: string | undefined): string[] {
  const lines = (description ?? '').split('\n').map((l) => l.trim());
  const seal = lines.findIndex((l) => l.startsWith(SEAL));
  return seal < 0 ? lines : lines.slice(0, seal + 1);
}

/** The workflow id that created the VM, or undefined for a VM the product did not create. */
export function ownerOf(description: string | undefined): string | undefined {
  return markerValue(description, OWNER);
}

export function specOf(description: string | undefined): InstallSpec | undefined {
  return parseSpecMarker(markerValue(description, SPEC));
}

/**
 * The spec a spec marker's value holds, in today's field names, unchecked (it is input:
 * check it before use). The marker itself is never rewritten: its seal covers it as written.
 */
export function parseSpecMarker(v: string | undefined): InstallSpec | undefined {
  if (!v) return undefined;
  try {
    return renameLegacySpecFields(JSON.parse(Buffer.from(v, 'base64url').toString('utf8'))) as InstallSpec;
  } catch {
    return undefined;
  }
}

/** The owner an adoption writes: not a workflow that could still be running (a rebuild asks). */
export function adoptionOwner(vmid: number, runId: string): string {
  return `adopted-vm-${vmid}-${runId}`;
}

/**
 * The description of an adopted VM: what the operator wrote stays first, then the owner
 * marker and a line saying when and by which workflow run (and for which client) it was adopted.
 */
export function adoptedDescription(
  description: string | undefined,
  adoption: { owner: string; at: string; workflowId: string; runId: string; by?: string; tenant?: string },
  seal?: (f: MarkerFields) => string,
  vm?: { vmid: number; instance: string },
): string {
  const note = adoptionNote(adoption);
  const kept = (description ?? '').replace(/\s+$/, '');
  const sealed =
    seal && vm !== undefined
      ? `\n${RUN}${adoption.runId}\n${INSTANCE}${vm.instance}\n${SEAL}${seal({ vmid: vm.vmid, instance: vm.instance, owner: adoption.owner, run: adoption.runId, adopted: note })}`
      : '';
  return `${kept ? `${kept}\n` : ''}${ownerMarker(adoption.owner)}\n${ADOPTED}${note}${sealed}`;
}

function adoptionNote(adoption: { at: string; workflowId: string; runId: string; by?: string; tenant?: string }): string {
  return `${adoption.at} workflow=${adoption.workflowId} run=${adoption.runId}${adoption.by ? ` by=${adoption.by}` : ''}${adoption.tenant ? ` tenant=${adoption.tenant}` : ''}`;
}

/** The tenant an adoption note names (`tenant=`), sealed with it; undefined when it names none. */
export function adoptedTenant(note: string | undefined): string | undefined {
  return note === undefined ? undefined : /(?:^| )tenant=([A-Za-z0-9._@-]{1,64})(?: |$)/.exec(note)?.[1];
}

/**
 * A description without QemuRun's marker lines: what an adoption keeps of a VM whose markers
 * are not sealed (written by hand, or by a version before sealing). They are untrusted, the
 * spec marker included, so the adoption writes its own instead of adding to them.
 */
export function withoutMarkers(description: string | undefined): string {
  const ours = [OWNER, RUN, INSTANCE, SPEC, ADOPTED, TEMPLATE, SEAL];
  return (description ?? '')
    .split('\n')
    .filter((l) => !ours.some((prefix) => l.trim().startsWith(prefix)))
    .join('\n');
}

/** An owner an adoption wrote (adoptionOwner), not a workflow id. */
export function isAdoptionOwner(owner: string): boolean {
  return /^adopted-vm-\d+-/.test(owner);
}

/** When the VM was adopted (the line adoptedDescription wrote), or undefined. */
export function adoptionOf(description: string | undefined): string | undefined {
  return markerValue(description, ADOPTED);
}

/** The refusal of a mutating operation on a VM outside the managed set, in the API's and the worker's words. */
export function notManagedMessage(vmid: number, name?: string, reason = 'its description has no qemurun-owner marker'): string {
  return (
    `VM ${vmid}${name ? ` (${name})` : ''} is not managed by QemuRun: ${reason}. ` +
    `Adopt it first (POST /api/vm/${vmid}/adopt), or set MANAGE_ALL_VMS=true to act on every VM`
  );
}
