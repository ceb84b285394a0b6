/**
 * Group commit for ingest: calls that arrive while a transaction is being written
 * wait and go together into the next one, so throughput is not bounded by one
 * durable commit per update.
 */
import type { IngestOutcome, NewUpdate, UpdatesRepo } from '../storage/updates-repo.js';

interface Pending {
  items: NewUpdate[];
  resolve: (o: IngestOutcome[]) => void;
  reject: (e: unknown) => void;
}

export function createUpdateWriter(repo: UpdatesRepo, onCommitted: () => void, maxBatch = 500, now = Date.now) {
  const queue: Pending[] = [];
  let writing = false;

  async function drain() {
    writing = true;
    try {
      while (queue.length > 0) {
        const batch: Pending[] = [];
        let size = 0;
        while (queue.length > 0 && (batch.length === 0 || size + queue[0]!.items.length <= maxBatch)) {
          const p = queue.shift()!;
          batch.push(p);
          size += p.items.length;
        }
        try {
          const outcomes = await repo.ingest(batch.flatMap((p) => p.items), now());
          let at = 0;
          for (const p of batch) {
            p.resolve(outcomes.slice(at, at + p.items.length));
            at += p.items.length;
          }
          onCommitted();
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      writing = false;
    }
  }

  return {
    /** Resolves once the items are committed (or refused), one outcome per item. */
    write(items: NewUpdate[]): Promise<IngestOutcome[]> {
      return new Promise((resolve, reject) => {
        queue.push({ items, resolve, reject });
        if (!writing) void drain();
      });
    },
  };
}

export type UpdateWriter = ReturnType<typeof createUpdateWriter>;
