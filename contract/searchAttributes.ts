import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

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
