import { defineSearchAttributeKey, type SearchAttributePair, SearchAttributeType } from '@temporalio/common';
import { vmName } from './ids';
import type { InstallSpec } from './types';

/**
 * Custom search attributes, so every run is findable in the Temporal UI and with
 * `temporal workflow list --query "VmId = 120"`. Values are stored in plain text by
 * Temporal (the payload codec never sees them): nothing secret goes here.
 */
export const VM_ID = defineSearchAttributeKey('VmId', SearchAttributeType.INT);
export const VM_NODE = defineSearchAttributeKey('VmNode', SearchAttributeType.KEYWORD);
export const VM_OS = defineSearchAttributeKey('VmOs', SearchAttributeType.KEYWORD);
export const VM_NAME = defineSearchAttributeKey('VmName', SearchAttributeType.KEYWORD);
export const VM_OPERATION = defineSearchAttributeKey('VmOperation', SearchAttributeType.KEYWORD);

export const ALL_SEARCH_ATTRIBUTES = [VM_ID, VM_NODE, VM_OS, VM_NAME, VM_OPERATION];

/**
 * The search attributes of an install or rebuild of `spec`, in one place: what the API
 * sets when it starts one, what the workflow upserts as it learns the VMID and the node,
 * and what a rebuild starts its install with. The node is set only once someone knows it
 * (asked for in the spec, or where the worker created the VM): the API does not guess it.
 */
export function vmSearchAttributes(
  operation: 'install' | 'rebuild',
  spec: InstallSpec,
  known: { vmid?: number; node?: string } = {},
): SearchAttributePair[] {
  const vmid = known.vmid ?? spec.vmid;
  const node = known.node ?? spec.node;
  return [
    { key: VM_OPERATION, value: operation },
    { key: VM_OS, value: `${spec.os}-${spec.version}` },
    ...(node !== undefined ? [{ key: VM_NODE, value: node }] : []),
    // The Proxmox name, `<name>-<vmid>`, is known once the VMID is.
    ...(vmid !== undefined ? [{ key: VM_ID, value: vmid }, { key: VM_NAME, value: vmName(spec.name, vmid) }] : []),
  ];
}
