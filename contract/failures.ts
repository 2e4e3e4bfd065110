/**
 * Error types (the `type` of an ApplicationFailure, i.e. the error class name thrown by an
 * activity) that retrying cannot heal. One list, used by every workflow's retry policy;
 * lib/proxmox/errors.ts and lib/images map command outputs and HTTP answers onto these
 * classes. Workflow code imports this file, so it must stay free of Node.js imports.
 */
export const NON_RETRYABLE_ERRORS = [
  'VmidTakenError',
  'VmNotFoundError',
  'ParameterError',
  'StorageError',
  'NoSuchNodeError',
  'VmStateError',
  'NoFreeVmidError',
  'SshTimeoutError',
  'ImageNotFoundError',
  'CpuLevelError',
  'NotOwnedError',
  'NotManagedError',
  'AlreadyManagedError',
  'InvalidRequestError',
  'ConfigError',
];
