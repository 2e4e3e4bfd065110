import { MockActivityEnvironment } from '@temporalio/testing';
import type { Client } from '@temporalio/client';
import { carryingOutputTail, outputStream } from '../../activities/output';
import { OUTPUT_TAIL, type OutputBatch, splitOutputTail } from '../../contract';

/**
 * Command output an activity prints reaches its workflow as output signals while it runs,
 * and what is left at its end rides with its result (contract OUTPUT_TAIL): an activity
 * done within a second sends no signal. A failed attempt has no result, so it signals.
 */

/** A client whose workflow handle records the output signals sent to it. */
function recordingClient(): { client: Client; signals: OutputBatch[] } {
  const signals: OutputBatch[] = [];
  const handle = { signal: async (_def: unknown, batch: OutputBatch) => void signals.push(batch) };
  return { client: { workflow: { getHandle: () => handle } } as unknown as Client, signals };
}

const messages = (batch: OutputBatch | undefined) => batch?.lines.map((l) => l.message) ?? [];

test('output left at the end comes with the result, and no signal is sent', async () => {
  const { client, signals } = recordingClient();
  const result = await new MockActivityEnvironment().run(() =>
    carryingOutputTail(async () => {
      const out = outputStream(client);
      out.line('importing');
      out.line('done', 'success');
      await out.close();
      return 'local:vm-120-disk-0';
    }),
  );
  expect(signals).toEqual([]);
  expect(result).toEqual({ [OUTPUT_TAIL]: { lines: [{ status: 'processing', message: 'importing' }, { status: 'success', message: 'done' }] }, result: 'local:vm-120-disk-0' });
  expect(splitOutputTail(result)).toEqual({ tail: { lines: expect.any(Array) }, result: 'local:vm-120-disk-0' });
});

test('an activity that printed nothing returns its result as it is, as results recorded before the tail do', async () => {
  const { client } = recordingClient();
  const result = await new MockActivityEnvironment().run(() =>
    carryingOutputTail(async () => {
      await outputStream(client).close();
      return { reboot: { required: false, why: 'nothing asks for it' } };
    }),
  );
  expect(result).toEqual({ reboot: { required: false, why: 'nothing asks for it' } });
  expect(splitOutputTail(result)).toEqual({ result });
  expect(splitOutputTail(undefined)).toEqual({ result: undefined });
});

test('a failed attempt sends what it held as a signal before its failure', async () => {
  const { client, signals } = recordingClient();
  const run = new MockActivityEnvironment().run(() =>
    carryingOutputTail(async () => {
      const out = outputStream(client);
      try {
        out.line('E: Unable to locate package qemu-guest-agent', 'error');
        throw new Error('init script exited with code 100');
      } finally {
        await out.close();
      }
    }),
  );
  await expect(run).rejects.toThrow('init script exited with code 100');
  expect(signals.map(messages)).toEqual([['E: Unable to locate package qemu-guest-agent']]);
});

test('lines keep their order when a later stream of the same attempt has to signal', async () => {
  const { client, signals } = recordingClient();
  const result = await new MockActivityEnvironment().run(() =>
    carryingOutputTail(async () => {
      const cloudInit = outputStream(client);
      cloudInit.line('cloud-init finished with warnings');
      await cloudInit.close();
      const script = outputStream(client);
      // A full batch is sent at once, whatever the time.
      for (let i = 0; i < 1000; i++) script.line(`line ${i}`);
      script.line('last');
      await script.close();
      return undefined;
    }),
  );
  expect(signals).toHaveLength(1);
  expect(messages(signals[0]).slice(0, 2)).toEqual(['cloud-init finished with warnings', 'line 0']);
  expect(messages(signals[0]).at(-1)).toBe('line 999');
  expect(messages(splitOutputTail(result).tail)).toEqual(['last']);
});

test('without the worker interceptor around it (a plain call), a stream signals what is left', async () => {
  const { client, signals } = recordingClient();
  await new MockActivityEnvironment().run(async () => {
    const out = outputStream(client);
    out.line('fetching');
    await out.close();
  });
  expect(signals.map(messages)).toEqual([['fetching']]);
});
