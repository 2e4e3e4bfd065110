import { NON_RETRYABLE_ERRORS } from '../contract';
import { NON_RETRYABLE_PROXMOX_ERRORS } from '../lib/proxmox/errors';
import { ImageNotFoundError } from '../lib/images/errors';

// One list decides what Temporal retries; every error class marked final must be on it.
test('every non-retryable error class is in the one list the workflows use', () => {
  for (const name of NON_RETRYABLE_PROXMOX_ERRORS) expect(NON_RETRYABLE_ERRORS).toContain(name);
  expect(NON_RETRYABLE_ERRORS).toContain(new ImageNotFoundError('x').name);
  expect(NON_RETRYABLE_ERRORS).not.toContain('VmLockedError');
  expect(NON_RETRYABLE_ERRORS).not.toContain('ImageDownloadError');
});
