/**
 * The outbound feed's events other than sent messages (edits, deletes, chat actions):
 * each written with its outbox message (→ the bus) at its chat's next place in the feed
 * (units.ts's feedEvents). Events alone (chat actions: a "typing…" before most answers)
 * share transactions as sends do (group commit); an event with the write it announces
 * (an edit's new message, a delete's removal) has a transaction of its own, since the
 * write may refuse it (the message deleted meanwhile).
 */
import { createGroupCommit } from '../group-commit.js';
import type { Writer } from '../storage/db.js';
import type { FeedEventItem, UnitsOfWork } from '../storage/units.js';

export function createFeedEventWriter(units: Pick<UnitsOfWork, 'feedEvents'>, onCommitted: () => void, maxBatch = 200, now = Date.now) {
  const commit = createGroupCommit<FeedEventItem, undefined>(async (items) => {
    await units.feedEvents(items, now());
    return items.map(() => undefined);
  }, { maxBatch, onCommitted, gather: 'turn' });
  return {
    /** An event alone, once committed (with the events of calls arriving in the same turn). */
    async announce(item: FeedEventItem): Promise<void> {
      await commit.write([item]);
    },
    /** Events with the writes they announce (`also`, in the same transaction, first: what it throws refuses them all). */
    async write<T>(items: FeedEventItem[], also: (w: Writer) => Promise<T>): Promise<T> {
      const result = await units.feedEvents(items, now(), also);
      onCommitted();
      return result as T;
    },
  };
}

export type FeedEventWriter = ReturnType<typeof createFeedEventWriter>;
