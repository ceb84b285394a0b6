/**
 * Group commit: calls that arrive while one batch is being written wait and go
 * together into the next, so a hot path pays one durable write (or one read, or one
 * publish) per batch rather than per call. Each call hands in items and gets one
 * result per item back. The batching helper of the service: update ingest, sends,
 * webhook outcomes, the limiter's counters, control signals and the feed's heads all
 * gather their calls through it.
 */

export interface GroupCommitOptions {
  /** Most items in one batch (500). A call's items are never split: a larger call goes alone. */
  maxBatch?: number;
  /** Told after each batch that committed (not after one that failed). */
  onCommitted?: () => void;
  /**
   * What a batch waits for besides the batch being written, when it could start:
   * - `'none'` (the default): nothing; a call that finds no batch being written starts
   *   one at once, and only calls arriving meanwhile share the next;
   * - `'turn'`: a first batch starts after the current turn of the event loop
   *   (setImmediate), so the calls arriving in the same turn share it;
   * - a number of ms: each batch that is not full waits that long first, so calls
   *   arriving meanwhile share it (for calls that arrive one at a time, each with a few
   *   items, where one statement per batch costs as much as one per call).
   */
  gather?: 'none' | 'turn' | number;
}

export interface GroupCommit<I, O> {
  /** Resolves once the items are committed, one result per item (rejects with the batch's error). */
  write(items: I[]): Promise<O[]>;
}

export function createGroupCommit<I, O>(commit: (items: I[]) => Promise<O[]>, opts: GroupCommitOptions = {}): GroupCommit<I, O> {
  const maxBatch = opts.maxBatch ?? 500;
  const onCommitted = opts.onCommitted;
  const gather = opts.gather ?? 'none';
  const lingerMs = typeof gather === 'number' && gather > 0 ? gather : 0;
  const afterTurn = gather === 'turn';
  interface Pending {
    items: I[];
    resolve: (o: O[]) => void;
    reject: (e: unknown) => void;
  }
  const queue: Pending[] = [];
  let writing = false;

  async function drain() {
    writing = true;
    try {
      while (queue.length > 0) {
        if (lingerMs > 0 && queue.reduce((n, p) => n + p.items.length, 0) < maxBatch) {
          await new Promise((r) => setTimeout(r, lingerMs));
        }
        const batch: Pending[] = [];
        let size = 0;
        while (queue.length > 0 && (batch.length === 0 || size + queue[0]!.items.length <= maxBatch)) {
          const p = queue.shift()!;
          batch.push(p);
          size += p.items.length;
        }
        try {
          const results = await commit(batch.flatMap((p) => p.items));
          let at = 0;
          for (const p of batch) {
            p.resolve(results.slice(at, at + p.items.length));
            at += p.items.length;
          }
          onCommitted?.();
        } catch (err) {
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      writing = false;
    }
  }

  return {
    write(items: I[]): Promise<O[]> {
      return new Promise((resolve, reject) => {
        queue.push({ items, resolve, reject });
        if (writing) return;
        if (afterTurn) {
          writing = true;
          setImmediate(() => void drain());
        } else void drain();
      });
    },
  };
}
