/**
 * Download progress, throttled: the callback usually becomes a Temporal heartbeat and an
 * SSE event, and a 600 MB image arrives in ~40 000 chunks, so at most one report per 1%
 * and per 500 ms gets through. The first and the final report always do.
 */

export interface DownloadProgress {
  receivedBytes: number;
  /** Undefined when the server sends no length. */
  totalBytes: number | undefined;
  /** 0..100, rounded down so 100 means done; undefined when the total is unknown. */
  percent: number | undefined;
}

export type ProgressListener = (p: DownloadProgress) => void;

export class ProgressThrottle {
  private lastAt = -Infinity;
  private lastPercent = -Infinity;

  constructor(
    private readonly emit: ProgressListener,
    private readonly minIntervalMs = 500,
    private readonly now: () => number = Date.now,
  ) {}

  report(receivedBytes: number, totalBytes: number | undefined, final = false): void {
    const percent =
      totalBytes !== undefined && totalBytes > 0 ? Math.min(100, Math.floor((receivedBytes * 100) / totalBytes)) : undefined;
    const t = this.now();
    const first = this.lastAt === -Infinity;
    const advanced = percent === undefined || percent >= this.lastPercent + 1;
    if (!first && !final && (!advanced || t - this.lastAt < this.minIntervalMs)) return;
    this.lastAt = t;
    this.lastPercent = percent ?? this.lastPercent;
    this.emit({ receivedBytes, totalBytes, percent });
  }
}
