/**
 * A full collection asked for once a burst of work has passed, so that what the burst
 * left in the heap goes back to the system now, not whenever V8 gets to it.
 *
 * Why: a burst of long polls (every bot reconnecting after a deploy) grows the heap by its
 * live polls and by the garbage of their requests, much of it promoted before it died, and
 * grows the young generation to its largest (2 x --max-semi-space-size). V8 gives that back
 * with its memory reducer, which acts only once the process allocates little, checking
 * every 8 s: whether it had run when RSS was read decided whether 10,000 idle polls on
 * MariaDB + Kafka held 236 or 272 MiB (docs/benchmarks/results.md, goal 4). The process
 * knows when a burst is over (no poll has arrived for a second) better than that timer.
 *
 * How: V8's "low memory" collection (what a heap snapshot does first), asked through an
 * in-process inspector session (HeapProfiler.collectGarbage; no port is opened): full and
 * compacting, and it shrinks the young generation. A plain major collection does not do:
 * it frees the garbage but leaves its pages committed (the polls' live objects spread over
 * them), RSS where it was (vm.measureMemory's, tried: 165 -> 128 MiB of heap used, 182
 * MiB committed before and after). The cost: the process stops for it, once per burst
 * (two full collections of about 0.15 s each with 10,000 polls held, on this machine).
 */
import { Session } from 'node:inspector';

/** Asks V8 for a full, compacting collection (the inspector's collectGarbage; done within a turn or two). */
export function collectSoon(): void {
  const session = new Session();
  session.connect();
  // Disconnected on the next turn, not from inside its own callback (tried so, a test
  // script's pending timer never ran).
  session.post('HeapProfiler.collectGarbage', () => setImmediate(() => session.disconnect()));
}

/**
 * Watches how many units (long polls) the process holds, told at each new one (note: a
 * comparison and a clock read), and once they have grown by `burst` or more over the
 * fewest seen since the last collection, and none has come for `quietMs`, asks for one.
 * A steady stream of calls (a bot polling again and again) does not grow what is held: it
 * never counts as a burst. One unref'd timer at most, armed by the burst: nothing per unit.
 */
export function createBurstTrim(opts: { burst: number; quietMs: number; held: () => number; collect?: () => void }) {
  const collect = opts.collect ?? collectSoon;
  /** The fewest units held since the last collection. */
  let fewest = Infinity;
  let last = 0;
  let timer: NodeJS.Timeout | undefined;

  function check() {
    const quiet = performance.now() - last;
    if (quiet < opts.quietMs) {
      timer = setTimeout(check, opts.quietMs - quiet).unref();
      return;
    }
    timer = undefined;
    fewest = opts.held();
    collect();
  }

  return {
    /** A new unit arrived; `held` units are held with it. */
    note(held: number) {
      last = performance.now();
      // Before this one came, one fewer (or as many, when it replaced a bot's older poll).
      if (held - 1 < fewest) fewest = held - 1;
      if (held - fewest >= opts.burst && timer === undefined) timer = setTimeout(check, opts.quietMs).unref();
    },
    close() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
