import type { InstallSpec } from './types';

/**
 * Markers the product writes into a VM's description (Proxmox keeps it in the VM config,
 * so it travels with migrations and is visible in the Proxmox UI's Notes). The owner
 * marker is what cleanup checks before destroying anything; the spec marker is what a
 * rebuild re-creates the VM from. Neither holds a secret.
 */

const OWNER = 'qemurun-owner=';
const SPEC = 'qemurun-spec=';

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
