import { failureStatus, FAILURE_TYPES, NON_RETRYABLE_ERRORS } from '../../contract';
import { ImageChecksumError, ImageDownloadError, ImageNotFoundError } from '../../lib/images/errors';

// One table decides what Temporal retries and what the API answers; the error classes read it.
test('every image error class is a failure type, and reads its retryability from the table', () => {
  const errors = [new ImageNotFoundError('x'), new ImageDownloadError('x'), new ImageChecksumError('u', 'a', 'b')];
  for (const err of errors) {
    expect(Object.keys(FAILURE_TYPES)).toContain(err.name);
    expect(err.nonRetryable).toBe(NON_RETRYABLE_ERRORS.includes(err.name));
  }
  expect(NON_RETRYABLE_ERRORS).toContain('ImageNotFoundError');
  expect(NON_RETRYABLE_ERRORS).not.toContain('ImageDownloadError');
  expect(NON_RETRYABLE_ERRORS).not.toContain('VmLockedError');
});

test('the API status of a failure type comes from the same table; an unknown type is a 500', () => {
  expect(failureStatus('VmNotFoundError')).toBe(404);
  expect(failureStatus('NotManagedError')).toBe(409);
  expect(failureStatus('SshTimeoutError')).toBe(504);
  expect(failureStatus('SomethingElse')).toBe(500);
  expect(failureStatus(undefined)).toBe(500);
});
