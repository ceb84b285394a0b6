/**
 * Entries of a long-lived owner that come and go by the thousand a second (calls under way),
 * in an array whose freed slots are reused.
 *
 * Why not a Map or a Set: V8 rebuilds a Map's table after so many insertions (a deleted entry
 * leaves a hole until then), and the table it leaves behind keeps its entries and a link to the
 * table that replaced it. Once one such table is in the old generation, a scavenge takes what it
 * points to as alive (old-to-new references are the scavenge's roots): every later table and
 * every call they held survive, then are promoted. Under load the gateway's Map of calls under
 * way made about 1 MB of each scavenge's survivors old — whole requests, held at the limiter's
 * turn — with a mark-compact every 2–3 s (docs/benchmarks/results.md, "The Map that aged every
 * request"). An array slot is overwritten in place: an entry that ended leaves nothing behind.
 */
export class Slots<T> {
  private readonly items: (T | undefined)[] = [];
  private readonly free: number[] = [];
  private count = 0;

  /** Keeps `item`; the slot it is in, for `delete`. */
  add(item: T): number {
    const slot = this.free.length > 0 ? this.free.pop()! : this.items.length;
    this.items[slot] = item;
    this.count++;
    return slot;
  }

  /** Lets go of `item` in `slot` (nothing if it is no longer there: a slot is reused once freed). */
  delete(slot: number, item: T): void {
    if (this.items[slot] !== item) return;
    this.items[slot] = undefined;
    this.free.push(slot);
    this.count--;
  }

  get size(): number {
    return this.count;
  }

  /** The entries kept now (a copy: the caller may delete as it goes). */
  values(): T[] {
    const out: T[] = [];
    for (const item of this.items) if (item !== undefined) out.push(item);
    return out;
  }
}
