import { proxyActivities, RetryPolicy } from '@temporalio/workflow';
import { type Activities, NON_RETRYABLE_ERRORS } from '../contract';

/**
 * Activity options by nature, shared by every workflow: one retry policy whose
 * non-retryable types come from the one list in contract/failures.ts. Every activity
 * heartbeats while it runs (activities/keepAlive.ts), so the heartbeat timeout, not the
 * start-to-close timeout, is what notices a worker that died: the next attempt starts on
 * another worker within heartbeat timeout + first retry interval (docs/how-an-install-runs.md).
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
  heartbeatTimeout: '10s',
  retry: { ...retry, maximumAttempts: 8 },
});

/** Long transfers (download, import, migrate) that heartbeat, so a dead worker is noticed. */
export const transfer = proxyActivities<Activities>({
  startToCloseTimeout: '2h',
  heartbeatTimeout: '20s',
  retry: { ...retry, maximumAttempts: 5 },
});

/** Waiting on a guest: a VM boots in seconds to minutes, and cloud-init may reboot it. */
export const guest = proxyActivities<Activities>({
  startToCloseTimeout: '1h',
  heartbeatTimeout: '20s',
  retry: { ...retry, maximumAttempts: 3 },
});

/** Cleanup must get through even when the cluster is busy. */
export const cleanup = proxyActivities<Activities>({
  startToCloseTimeout: '5m',
  heartbeatTimeout: '10s',
  retry: { ...retry, maximumAttempts: 20, maximumInterval: '30s' },
});
