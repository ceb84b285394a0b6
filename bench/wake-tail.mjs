/**
 * node bench/wake-tail.mjs DIR: bench:updates' wake-up samples (BENCH_WAKE_LOG=DIR/samples.jsonl)
 * beside the marks bench/event-marks.mjs wrote into DIR: per setup (0: the floor, 1: the
 * service), its percentiles, its process's and the bench's collections and long callbacks in
 * the sampling window, and its slowest samples with every mark of its process or of the bench
 * that overlapped them (ms after the sample's start).
 */
import fs from 'node:fs';
import path from 'node:path';

const dir = process.argv[2] ?? '.';
const read = (f) => fs.readFileSync(path.join(dir, f), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const samples = read('samples.jsonl');
const marks = { floor: [], service: [], bench: [] };
for (const f of fs.readdirSync(dir)) {
  if (!f.endsWith('.jsonl') || f === 'samples.jsonl') continue;
  const who = f.startsWith('main.js.') ? 'service' : f.startsWith('wake-floor') ? 'floor' : f.startsWith('updates.ts.') ? 'bench' : undefined;
  if (who) marks[who].push(...read(f));
}
const from = Math.min(...samples.map((s) => s.at));
const to = Math.max(...samples.map((s) => s.at + s.ms));
const inWindow = (list) => list.filter((e) => e.at >= from && e.at <= to);
const summary = (list) => {
  const by = new Map();
  for (const e of list) {
    const k = `${e.t}:${e.name}`;
    const v = by.get(k) ?? { n: 0, ms: 0, max: 0 };
    v.n++; v.ms += e.ms; v.max = Math.max(v.max, e.ms);
    by.set(k, v);
  }
  return [...by].map(([k, v]) => `${k} ${v.n}× (${v.ms.toFixed(1)} ms, max ${v.max.toFixed(2)})`).join('; ') || 'none';
};
for (const [setup, who] of [[0, 'floor'], [1, 'service']]) {
  const own = samples.filter((s) => s.setup === setup);
  if (own.length === 0) continue;
  const sorted = own.map((s) => s.ms).sort((a, b) => a - b);
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))].toFixed(2);
  const mine = inWindow(marks[who]);
  const bench = inWindow(marks.bench);
  console.log(`${who}: ${own.length} samples, p50 ${pct(50)} p90 ${pct(90)} p99 ${pct(99)} max ${pct(100)} ms`);
  console.log(`  its process: ${summary(mine)}`);
  console.log(`  the bench:   ${summary(bench)}`);
  const overlapping = (s) => [...mine.map((e) => ['own', e]), ...bench.map((e) => ['bench', e])]
    .filter(([, e]) => e.at < s.at + s.ms && e.at + e.ms > s.at);
  for (const s of [...own].sort((a, b) => b.ms - a.ms).slice(0, 12)) {
    const o = overlapping(s).map(([w, e]) => `${w} ${e.t}:${e.name} ${e.ms.toFixed(2)} ms at +${(e.at - s.at).toFixed(2)}`).join(', ');
    console.log(`  ${s.ms.toFixed(2)} ms (poll ${s.pollMs.toFixed(2)}), sample ${s.i} at ${((s.at - from) / 1000).toFixed(2)} s: ${o || '-'}`);
  }
}
