/**
 * A preload for finding what makes a benchmark's slow samples (bench:updates' wake-up tail):
 * every process it is loaded into writes, when it exits, each V8 collection (its kind and
 * pause, from PerformanceObserver) and each timer or immediate callback that ran 0.2 ms or
 * longer (the callback's name), with its start in epoch ms, to
 * EVENT_MARKS_DIR/<script>.t<thread>.<pid>.jsonl. Load it into the bench, its floors and the
 * services at once through NODE_OPTIONS, with BENCH_WAKE_LOG for the samples, then set them
 * side by side (bench/wake-tail.mjs):
 *
 *   mkdir -p /tmp/marks && BENCH_ONLY=wake BENCH_WAKE_LOG=/tmp/marks/samples.jsonl EVENT_MARKS_DIR=/tmp/marks \
 *     NODE_OPTIONS="--import $PWD/bench/event-marks.mjs" npm run bench:updates
 *   node bench/wake-tail.mjs /tmp/marks
 *
 * The wrapping costs a clock read per callback: the figures of such a run are not the bench's.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { threadId } from 'node:worker_threads';

const dir = process.env.EVENT_MARKS_DIR ?? '.';
const script = path.basename(process.argv[1] ?? 'node');
const origin = performance.timeOrigin;
const events = [];
// perf_hooks' constants NODE_PERFORMANCE_GC_*.
const KIND = { 1: 'minor', 4: 'major', 8: 'incremental', 16: 'weakcb' };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) events.push({ t: 'gc', name: KIND[e.detail?.kind] ?? String(e.detail?.kind), at: origin + e.startTime, ms: e.duration });
}).observe({ entryTypes: ['gc'] });

const timed = (schedule, kind) => function (fn, ...rest) {
  if (typeof fn !== 'function') return schedule.call(this, fn, ...rest);
  const name = fn.name || kind;
  return schedule.call(this, function (...args) {
    const start = performance.now();
    try {
      return fn.apply(this, args);
    } finally {
      const ms = performance.now() - start;
      if (ms >= 0.2) events.push({ t: kind, name, at: origin + start, ms });
    }
  }, ...rest);
};
globalThis.setTimeout = timed(globalThis.setTimeout, 'timeout');
globalThis.setInterval = timed(globalThis.setInterval, 'interval');
globalThis.setImmediate = timed(globalThis.setImmediate, 'immediate');

const write = () => {
  try {
    fs.writeFileSync(path.join(dir, `${script}.t${threadId}.${process.pid}.jsonl`), events.map((e) => JSON.stringify(e)).join('\n') + '\n');
  } catch {
    // the directory is gone: nothing to keep
  }
};
process.on('exit', write);
process.on('SIGTERM', write);
