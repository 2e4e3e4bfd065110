import { ApplicationFailure } from '@temporalio/common';
import { failure, FAILURE_TYPES, type FailureType } from '../../contract';

// Activities and workflows throw failure(type, message): the type is one of the table's, and
// whether Temporal may retry it is the table's answer, not the call site's.
test.each(Object.keys(FAILURE_TYPES) as FailureType[])('failure(%s) carries its type and the table says whether it retries', (type) => {
  const f = failure(type, 'why it failed');
  expect(f).toBeInstanceOf(ApplicationFailure);
  expect(f.type).toBe(type);
  expect(f.message).toBe('why it failed');
  expect(f.nonRetryable).toBe(!FAILURE_TYPES[type].retryable);
});

test('a retry heals an init script that failed, not a storage that does not exist', () => {
  expect(failure('InitScriptError', 'exit 1').nonRetryable).toBe(false);
  expect(failure('StorageError', "storage 'x' does not exist").nonRetryable).toBe(true);
});
