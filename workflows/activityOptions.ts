import { type ActivityOptions, proxyActivities, RetryPolicy } from '@temporalio/workflow';
import { type Activities, NON_RETRYABLE_ERRORS } from '../contract';

/**
 * Activity options by nature, shared by every workflow: one retry policy whose
 * non-retryable types come from the one table in contract/failures.ts. Every activity call
 * of every workflow goes through one of the proxies below. Every activity heartbeats while
 * it runs (activities/keepAlive.ts), so the heartbeat timeout, not the start-to-close
 * timeout, is what notices a worker that died: the next attempt starts on another worker
 * within heartbeat timeout + first retry interval (docs/how-an-install-runs.md).
 */
const retry: RetryPolicy = {
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '15s',
  nonRetryableErrorTypes: NON_RETRYABLE_ERRORS,
};

/** Quick Proxmox calls: a lock held by another task clears in seconds. */
const quickProxmox: ActivityOptions = {
  startToCloseTimeout: '3m',
  heartbeatTimeout: '10s',
  retry: { ...retry, maximumAttempts: 8 },
};
export const proxmox = proxyActivities<Activities>(quickProxmox);

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

/** ACPI shutdown waits for the guest (qm's own timeout is 60 s); a guest that ignores it will ignore it again. */
export const power = proxyActivities<Activities>({
  startToCloseTimeout: '3m',
  heartbeatTimeout: '10s',
  retry: { ...retry, maximumAttempts: 3 },
});

/** Follows a child workflow for as long as it runs (relayProgress); heartbeats every poll. */
export const follow = proxyActivities<Activities>({
  startToCloseTimeout: '6h',
  heartbeatTimeout: '20s',
  retry: { ...retry, maximumAttempts: 10 },
});

/** A quick look at Temporal itself (who holds a VM), from a workflow that must not wait long. */
export const quick = proxyActivities<Activities>({
  startToCloseTimeout: '30s',
  heartbeatTimeout: '10s',
  retry: { ...retry, maximumAttempts: 3 },
});

/** Reading every VM of the cluster, one `qm config` each: minutes on a big cluster, so it heartbeats per VM instead of one long deadline. */
export const survey = proxyActivities<Activities>({
  startToCloseTimeout: '10m',
  heartbeatTimeout: '30s',
  retry: { ...retry, maximumAttempts: 5 },
});

/** Cleanup must get through even when the cluster is busy. */
export const cleanup = proxyActivities<Activities>({
  startToCloseTimeout: '5m',
  heartbeatTimeout: '10s',
  retry: { ...retry, maximumAttempts: 20, maximumInterval: '30s' },
});
