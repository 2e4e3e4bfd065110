import { allHandlersFinished, condition, continueAsNew, setHandler, workflowInfo } from '@temporalio/workflow';
import { acquireSlotUpdate, type AcquireSlot, releaseSlotUpdate, type SlotAnswer, type SlotClaim, storageSlotsQuery, type StorageSlotsState } from '../contract';

/** Updates a run takes before it continues as new, so its history stays short to replay. */
const UPDATES_PER_RUN = 500;

/** The update's arguments, refused before they reach the history when they make no sense. */
function validateAcquire({ holder, limit, ttlMs }: AcquireSlot): void {
  if (typeof holder !== 'string' || holder === '') throw new Error('holder: must be a non-empty string');
  if (!Number.isInteger(limit) || limit < 1) throw new Error(`limit: must be a positive integer, not ${limit}`);
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new Error(`ttlMs: must be positive, not ${ttlMs}`);
}

/**
 * One storage's clone slots, as a long-lived entity (like workflows/addressPool.ts): at
 * most `limit` holders at once, the others queued in order of arrival. Temporal runs the
 * updates on one history, so no two workers count the slots differently, and the holders
 * outlive every crash. A slot not asked for again within its `ttlMs` is freed: a worker
 * that died holding one blocks the storage that long, not forever. Started by the first
 * acquire (update-with-start, activities/storageSlots.ts); never ends, but continues as
 * new with its holders and its queue when its history grows.
 */
export async function storageSlots(state: StorageSlotsState): Promise<void> {
  let holders: SlotClaim[] = [...state.holders];
  let waiting: SlotClaim[] = [...state.waiting];
  /** Holders whose acquire waits in this run, with the limit each asked under: only they can take a slot now. */
  const asking = new Map<string, { count: number; limit: number }>();
  const perRun = state.updatesPerRun ?? UPDATES_PER_RUN;
  let updates = 0;
  let handingOver = false;
  /** Bumped whenever the holders change, so the expiry timer below is set anew. */
  let changes = 0;

  const now = () => Date.now();
  const stamp = () => new Date(now()).toISOString();
  const expiresAt = (c: SlotClaim) => Date.parse(c.since) + c.ttlMs;
  const expire = () => {
    const kept = holders.filter((h) => expiresAt(h) > now());
    if (kept.length !== holders.length) {
      holders = kept;
      changes++;
    }
    // A claim carried over from the last run whose holder never asked again: gone.
    waiting = waiting.filter((w) => asking.has(w.holder) || expiresAt(w) > now());
  };
  /**
   * Hands the free slots to the waiters asking now, in order of arrival; claims carried
   * over wait for their holder to ask. The one place a slot is taken: it moves the claim
   * into `holders` at once, checking `holders.length` against the limit just before, so
   * holders never outnumber the limit, however many releases and acquires one activation
   * brings. (Deciding in a waiter's condition and taking the slot after its `await` let
   * every waiter of an activation count the same free slots: its handlers all run before
   * any continuation does.) Called after every change that may free a slot or add an
   * asker; not while handing over, when the next run grants.
   */
  const grant = () => {
    if (handingOver) return;
    for (const w of waiting.filter((c) => asking.has(c.holder))) {
      // In order: the first in line that does not fit stops the ones behind it too.
      if (holders.length >= (asking.get(w.holder)?.limit ?? 0)) break;
      waiting = waiting.filter((c) => c.holder !== w.holder);
      holders = [...holders.filter((h) => h.holder !== w.holder), { holder: w.holder, since: stamp(), ttlMs: w.ttlMs }];
      changes++;
    }
  };

  setHandler(storageSlotsQuery, () => ({ node: state.node, storage: state.storage, holders, waiting: waiting.map((w) => w.holder) }));

  setHandler(
    acquireSlotUpdate,
    async ({ holder, limit, ttlMs, renew }): Promise<SlotAnswer> => {
      updates++;
      expire();
      // Asked again while holding (a retried activity, a renewal): the slot stays its, for another ttl.
      if (holders.some((h) => h.holder === holder)) {
        holders = holders.map((h) => (h.holder === holder ? { holder, since: stamp(), ttlMs } : h));
        changes++;
        return { held: true, holders: holders.length };
      }
      if (renew) return { held: false, reason: 'expired' };
      // A claim from the last run keeps its place in the queue.
      const claim = { holder, since: stamp(), ttlMs };
      waiting = waiting.some((w) => w.holder === holder) ? waiting.map((w) => (w.holder === holder ? claim : w)) : [...waiting, claim];
      // Counted: a retried attempt may ask while its lost predecessor's acquire still waits.
      asking.set(holder, { count: (asking.get(holder)?.count ?? 0) + 1, limit });
      grant();
      try {
        await condition(() => holders.some((h) => h.holder === holder) || !waiting.some((w) => w.holder === holder) || handingOver);
      } finally {
        const n = (asking.get(holder)?.count ?? 1) - 1;
        if (n > 0) asking.set(holder, { count: n, limit });
        else asking.delete(holder);
      }
      // Answered from the state as it is now: the slot is taken by grant() alone, so an
      // answer and the holders never disagree. Both attempts of a retried holder hear `held`.
      if (holders.some((h) => h.holder === holder)) return { held: true, holders: holders.length };
      if (!waiting.some((w) => w.holder === holder)) return { held: false, reason: 'released' };
      return { held: false, reason: 'continued-as-new' };
    },
    { validator: validateAcquire },
  );

  setHandler(releaseSlotUpdate, ({ holder }) => {
    updates++;
    const held = holders.some((h) => h.holder === holder) || waiting.some((w) => w.holder === holder);
    if (holders.some((h) => h.holder === holder)) changes++;
    holders = holders.filter((h) => h.holder !== holder);
    waiting = waiting.filter((w) => w.holder !== holder);
    grant();
    return held;
  });

  const due = () => updates >= perRun || workflowInfo().continueAsNewSuggested;
  while (!due()) {
    expire();
    grant();
    const seen = changes;
    const woken = () => due() || changes !== seen;
    const next = holders.length > 0 ? Math.min(...holders.map(expiresAt)) - now() : undefined;
    // Until the first slot expires, or the holders change (which may move that time).
    if (next === undefined) await condition(woken);
    else await condition(woken, Math.max(1, next));
  }
  // Waiters answer `continued-as-new` and ask again; their claims go over with the holders.
  handingOver = true;
  // Again until true when this code runs: an acquire that came in the activation that
  // finished the last handler has started since, and must answer before the handover.
  while (!allHandlersFinished()) await condition(allHandlersFinished);
  await continueAsNew<typeof storageSlots>({
    node: state.node,
    storage: state.storage,
    holders,
    waiting,
    ...(state.updatesPerRun !== undefined ? { updatesPerRun: state.updatesPerRun } : {}),
  });
}
