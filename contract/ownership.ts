import type { InstallSpec } from './types';

/**
 * Markers the product writes into a VM's description (Proxmox keeps it in the VM config,
 * so it travels with migrations and is visible in the Proxmox UI's Notes). The owner
 * marker is what cleanup checks before destroying anything; the spec marker is what a
 * rebuild re-creates the VM from. Neither holds a secret.
 */

const OWNER = 'qemurun-owner=';
const SPEC = 'qemurun-spec=';
const ADOPTED = 'qemurun-adopted=';

export function ownerMarker(workflowId: string): string {
  return `${OWNER}${workflowId}`;
}

export function specMarker(spec: InstallSpec): string {
  return `${SPEC}${Buffer.from(JSON.stringify(spec)).toString('base64url')}`;
}

function markerValue(description: string | undefined, prefix: string): string | undefined {
  return (description ?? '')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.startsWith(prefix))
    ?.slice(prefix.length);
}

/** The workflow id that created the VM, or undefined for a VM the product did not create. */
export function ownerOf(description: string | undefined): string | undefined {
  return markerValue(description, OWNER);
}

export function isOwnedBy(description: string | undefined, workflowId: string): boolean {
  return ownerOf(description) === workflowId;
}

export function specOf(description: string | undefined): InstallSpec | undefined {
  const v = markerValue(description, SPEC);
  if (!v) return undefined;
  try {
    return JSON.parse(Buffer.from(v, 'base64url').toString('utf8')) as InstallSpec;
  } catch {
    return undefined;
  }
}

/**
 * The managed set: VMs carrying an owner marker, whether QemuRun installed them or an
 * operator adopted them. Unless MANAGE_ALL_VMS is set, mutating operations act on these only.
 */
export function isManaged(description: string | undefined): boolean {
  return ownerOf(description) !== undefined;
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
  adoption: { owner: string; at: string; workflowId: string; runId: string; by?: string },
): string {
  const note = `${ADOPTED}${adoption.at} workflow=${adoption.workflowId} run=${adoption.runId}${adoption.by ? ` by=${adoption.by}` : ''}`;
  const kept = (description ?? '').replace(/\s+$/, '');
  return `${kept ? `${kept}\n` : ''}${ownerMarker(adoption.owner)}\n${note}`;
}

/** When the VM was adopted (the line adoptedDescription wrote), or undefined. */
export function adoptionOf(description: string | undefined): string | undefined {
  return markerValue(description, ADOPTED);
}

/** The refusal of a mutating operation on a VM outside the managed set, in the API's and the worker's words. */
export function notManagedMessage(vmid: number, name?: string): string {
  return (
    `VM ${vmid}${name ? ` (${name})` : ''} is not managed by QemuRun: its description has no qemurun-owner marker. ` +
    `Adopt it first (POST /api/vm/${vmid}/adopt), or set MANAGE_ALL_VMS=true to act on every VM`
  );
}
