import { CancellationScope, isCancellation, log } from '@temporalio/workflow';
import { failureOf } from '../contract';
import type { Progress } from './progress';

/**
 * What a workflow that builds a VM does when a step fails for good or it is cancelled: runs
 * its compensations in order (each failure reported and the next one tried: a cluster too
 * busy for one cleanup step may take the next), out of reach of the cancellation, then
 * ends the stream with an error event naming the step that failed, as the seed's clients
 * expect. Returns the run's end state.
 */
export async function failWithCleanup(
  err: unknown,
  progress: Progress,
  compensations: ReadonlyArray<() => Promise<void>>,
  cancelledMessage: string,
): Promise<{ state: 'cancelled' | 'failed'; failedStep: string }> {
  const cancelled = isCancellation(err);
  const failedStep = progress.current;
  await CancellationScope.nonCancellable(async () => {
    for (const undo of compensations) {
      try {
        await undo();
      } catch (cleanupErr) {
        log.error('cleanup step failed', { error: failureOf(cleanupErr).message });
        progress.emit(failedStep, 'processing', `[-] cleanup failed: ${failureOf(cleanupErr).message}`);
      }
    }
  });
  progress.emit(failedStep, 'error', `[-] ${cancelled ? cancelledMessage : failureOf(err).message}`);
  progress.state = cancelled ? 'cancelled' : 'failed';
  return { state: progress.state as 'cancelled' | 'failed', failedStep };
}
