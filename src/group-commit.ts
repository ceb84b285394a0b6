/**
 * Group commit: calls that arrive while one batch is being written wait and go
 * together into the next, so a hot path pays one durable write per batch rather
 * than per call. Each call hands in items and gets one result per item back.
 */
export function createGroupCommit<I, O>(
  commit: (items: I[]) => Promise<O[]>,
  maxBatch = 500,
  onCommitted?: () => void,
  /**
   * Start a batch after the current turn of the event loop, so calls arriving in the same
   * turn share it; a number: wait that many ms before each batch that is not full, so
   * calls arriving meanwhile share it (for calls that arrive one at a time, each with a
   * few items, where one statement per batch costs as much as one per call).
   */
  deferStart: boolean | number = false,
) {
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
        if (typeof deferStart === 'number' && deferStart > 0 && queue.reduce((n, p) => n + p.items.length, 0) < maxBatch) {
          await new Promise((r) => setTimeout(r, deferStart));
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
    /** Resolves once the items are committed, one result per item. */
    write(items: I[]): Promise<O[]> {
      return new Promise((resolve, reject) => {
        queue.push({ items, resolve, reject });
        if (writing) return;
        if (deferStart === false || deferStart === 0) void drain();
        else if (deferStart === true) {
          writing = true;
          setImmediate(() => void drain());
        } else void drain();
      });
    },
  };
}
