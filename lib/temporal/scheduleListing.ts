import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';

/** One schedule as the server lists it: nothing decoded. */
export type ListedScheduleEntry = temporal.api.schedule.v1.IScheduleListEntry;

/**
 * Every schedule in the namespace, page by page, through the raw `ListSchedules` call (the
 * one the SDK's docs point to). The SDK's `client.schedule.list()` decodes each memo
 * through the payload codec, and one memo it cannot decode (a schedule made with
 * `temporal schedule create --memo`, or by a deployment with other keys) ends the whole
 * listing: anyone who may create a schedule in the namespace could break ours.
 */
export async function* listScheduleEntries(client: Client, namespace: string): AsyncGenerator<ListedScheduleEntry> {
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await client.workflowService.listSchedules({ namespace, nextPageToken });
    yield* page.schedules ?? [];
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken);
}

/**
 * A memo field of a listed schedule, decoded through the client's codec and converter; or
 * undefined when it is absent or this deployment cannot decode it (it is someone else's).
 */
export async function memoFieldOf(client: Client, entry: ListedScheduleEntry, name: string): Promise<unknown> {
  const payload = entry.memo?.fields?.[name];
  if (!payload) return undefined;
  const { payloadCodecs, payloadConverter } = client.options.loadedDataConverter;
  try {
    // Codecs decode in the reverse of the order they encode in.
    let payloads = [payload];
    for (const codec of [...payloadCodecs].reverse()) payloads = await codec.decode(payloads);
    return payloadConverter.fromPayload(payloads[0]);
  } catch {
    return undefined;
  }
}
