import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure } from '@temporalio/common';

/** What startChild throws when the child's id is taken; @temporalio/workflow does not re-export it. */
export { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';

/**
 * Every failure type the product names (the `type` of an ApplicationFailure, i.e. the error
 * class name an activity throws), each once: whether retrying can heal it, and the HTTP
 * status the API answers it with when an operation fails with it (none: 500).
 * lib/proxmox/errors.ts and lib/images map command outputs and HTTP answers onto these
 * classes; every workflow's retry policy takes NON_RETRYABLE_ERRORS from here.
 */
export const FAILURE_TYPES = {
  // What Proxmox answered (lib/proxmox/errors.ts knows its texts).
  VmLockedError: { retryable: true, status: 409 },
  LockTimeoutError: { retryable: true, status: 409 },
  // A storage's lock, held by parallel clones or template conversions on it (pve-storage
  // waits 10 s): the next attempt usually gets it.
  StorageLockError: { retryable: true, status: 409 },
  ProxmoxCommandError: { retryable: true },
  VmidTakenError: { retryable: false },
  VmNotFoundError: { retryable: false, status: 404 },
  ParameterError: { retryable: false, status: 400 },
  StorageError: { retryable: false, status: 400 },
  NoSuchNodeError: { retryable: false, status: 400 },
  VmStateError: { retryable: false, status: 400 },
  BridgeNotFoundError: { retryable: false },
  // A NIC's mtu the bridge cannot carry: the start fails until the VM or the bridge changes.
  NicMtuError: { retryable: false },
  // The API token lacks a privilege, or is not valid (API mode).
  PermissionDeniedError: { retryable: false, status: 403 },
  // Images (lib/images/errors.ts).
  ImageNotFoundError: { retryable: false },
  // API mode: the node cannot fetch images itself (Proxmox VE before 8.4).
  NodeTooOldError: { retryable: false },
  ImageDownloadError: { retryable: true },
  ImageChecksumError: { retryable: true },
  // Guests.
  SshTimeoutError: { retryable: false, status: 504 },
  InitScriptError: { retryable: true },
  // cloud-init never finished: a broken image or user-data; another wait would not help.
  CloudInitTimeoutError: { retryable: false, status: 504 },
  // A DHCP VM whose guest agent never reported an address: nothing else knows where it is.
  GuestAddressError: { retryable: false, status: 504 },
  // Something else answers at the VM's address: an operator must look (docs/security.md).
  HostKeyMismatchError: { retryable: false },
  AddressInUseError: { retryable: false, status: 409 },
  // The product's own rules.
  NoFreeVmidError: { retryable: false },
  // Address pools: a full pool stays full until a VM is destroyed.
  AddressPoolExhaustedError: { retryable: false, status: 409 },
  AddressTakenError: { retryable: false, status: 409 },
  // One holder has the leases its pool allows (maxLeasesPerHolder) until it gives one back.
  AddressQuotaError: { retryable: false, status: 429 },
  // Templates: an install that asked for `source: "template"` when none is current.
  TemplateNotFoundError: { retryable: false, status: 409 },
  CpuLevelError: { retryable: false },
  NotOwnedError: { retryable: false, status: 409 },
  NotManagedError: { retryable: false, status: 409 },
  // The VM at the VMID is another instance than the one the command was issued for (reused VMID).
  VmInstanceError: { retryable: false, status: 409 },
  // A command input issued too long ago, or for another workflow id: a replayed input.
  StaleCommandError: { retryable: false, status: 409 },
  AlreadyManagedError: { retryable: false, status: 409 },
  VmDisabledError: { retryable: false, status: 400 },
  VmBusyError: { retryable: false, status: 409 },
  InvalidRequestError: { retryable: false, status: 400 },
  ConfigError: { retryable: false },
  RebuildError: { retryable: false },
  // An activity of a run made by `temporal workflow reset` (workflows/interceptors.ts).
  ResetRunError: { retryable: false, status: 409 },
} as const satisfies Record<string, FailureKind>;

interface FailureKind {
  retryable: boolean;
  status?: number;
}

export type FailureType = keyof typeof FAILURE_TYPES;

/** The activity header that marks an activity of a reset run: its value is the run it was reset from. */
export const RESET_RUN_HEADER = 'qemurun-reset-of';

function isFailureType(type: string): type is FailureType {
  return Object.hasOwn(FAILURE_TYPES, type);
}

/** Whether a retry may heal a failure of this type; a type not listed is assumed transient. */
export function isRetryableType(type: string): boolean {
  return isFailureType(type) ? FAILURE_TYPES[type].retryable : true;
}

/** The HTTP status of an operation that failed with this type; 500 for one not listed. */
export function failureStatus(type: string | undefined): number {
  const kind: FailureKind | undefined = type !== undefined && isFailureType(type) ? FAILURE_TYPES[type] : undefined;
  return kind?.status ?? 500;
}

/**
 * Whether a failure's type is `type`. Comparing through here, the compiler checks the name
 * against the table above, as it does for `failure(type, message)`.
 */
export function isFailureOf(actual: string | undefined | null, type: FailureType): boolean {
  return actual === type;
}

/** The types no retry policy retries. */
export const NON_RETRYABLE_ERRORS: string[] = Object.keys(FAILURE_TYPES).filter((t) => !isRetryableType(t));

/**
 * A failure of one of the types above, retryable as the table says: activities and workflows
 * throw these, so the compiler checks the type's name and no call site decides its
 * retryability again.
 */
export function failure(type: FailureType, message: string): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: !isRetryableType(type) });
}

/**
 * The failure inside the wrappers Temporal puts around it (ActivityFailure,
 * ChildWorkflowFailure): the activity's or the child's own error, whose type and words say
 * what happened. A client unwraps WorkflowFailedError's `cause` first.
 */
export function unwrapFailure(err: unknown): unknown {
  let cur = err;
  while ((cur instanceof ActivityFailure || cur instanceof ChildWorkflowFailure) && cur.cause) cur = cur.cause;
  return cur;
}

/** The unwrapped failure's message and, for an ApplicationFailure, its type. */
export function failureOf(err: unknown): { message: string; type?: string } {
  const inner = unwrapFailure(err);
  const message = inner instanceof Error ? inner.message : String(inner);
  const type = inner instanceof ApplicationFailure ? (inner.type ?? undefined) : undefined;
  return type === undefined ? { message } : { message, type };
}
