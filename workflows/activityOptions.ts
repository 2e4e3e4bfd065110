import { proxyActivities, RetryPolicy } from '@temporalio/workflow';
import { type Activities, NON_RETRYABLE_ERRORS } from '../contract';

/**
 * Activity options by nature, shared by every workflow: one retry policy whose
 * non-retryable types come from the one list in contract/failures.ts.
 */
export const retry: RetryPolicy = {
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '15s',
  nonRetryableErrorTypes: NON_RETRYABLE_ERRORS,
};

/** Quick Proxmox calls: a lock held by another task clears in seconds. */
export const proxmox = proxyActivities<Activities>({
  startToCloseTimeout: '3m',
  retry: { ...retry, maximumAttempts: 8 },
});

/** Long transfers (download, import, migrate) that heartbeat, so a dead worker is noticed. */
export const transfer = proxyActivities<Activities>({
  startToCloseTimeout: '2h',
  heartbeatTimeout: '60s',
  retry: { ...retry, maximumAttempts: 5 },
});

/** Waiting on a guest: a VM boots in seconds to minutes, and cloud-init may reboot it. */
export const guest = proxyActivities<Activities>({
  startToCloseTimeout: '1h',
  heartbeatTimeout: '30s',
  retry: { ...retry, maximumAttempts: 3 },
});

/** Cleanup must get through even when the cluster is busy. */
export const cleanup = proxyActivities<Activities>({
  startToCloseTimeout: '5m',
  retry: { ...retry, maximumAttempts: 20, maximumInterval: '30s' },
});
