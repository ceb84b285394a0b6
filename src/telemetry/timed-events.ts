/**
 * Events counted and timed by label values, for the metrics every call records (the
 * gateway's requests, the core's calls): per label set, plain numbers found through
 * one map per label, the labels' own strings as keys (nothing built per event).
 * prom-client's Counter and Histogram build a label object, validate it, hash it into a
 * string and (the histogram) make a closure on every event. Measured side by side
 * (alternating rounds, embedded default): 0.97x the CPU per request of a console read.
 *
 * The events show in the registry (prom-client's, so /metrics renders them with the
 * others) as two metrics of the usual kinds: a counter of the events and a histogram of
 * their durations, the same lines as prom-client's own would write.
 */
import type { Registry } from 'prom-client';

/** One label set's figures. */
interface Series {
  readonly labels: Record<string, string | number>;
  /** Events per bucket (not cumulative); the last is above every bound (+Inf). */
  readonly perBucket: Float64Array;
  sum: number;
  count: number;
}

/** A map per label value, down to the series. */
type Level = Map<string | number, Level | Series>;

/** What prom-client's registry reads of a metric (its `get()`). */
interface MetricValue {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

export class TimedEvents {
  private readonly root: Level = new Map();
  private readonly all: Series[] = [];
  private readonly bounds: Float64Array;

  constructor(
    registry: Registry,
    private readonly labelNames: readonly string[],
    buckets: readonly number[],
    counter: { name: string; help: string },
    histogram: { name: string; help: string },
  ) {
    if (labelNames.length < 1 || labelNames.length > 3) throw new Error('TimedEvents takes one to three labels');
    this.bounds = Float64Array.from([...buckets].sort((a, b) => a - b));
    const view = (type: 'counter' | 'histogram', name: string, help: string, values: () => MetricValue[]) => {
      const about = { name, help, type, aggregator: 'sum' as const };
      // reset: the registry's resetMetrics(), as prom-client's own metrics forget their label sets.
      return { ...about, get: async () => ({ ...about, values: values() }), reset: () => this.reset() };
    };
    // The registry takes any object of this shape (registerMetric's type is its own classes').
    const register = (metric: ReturnType<typeof view>) => registry.registerMetric(metric as unknown as Parameters<Registry['registerMetric']>[0]);
    register(view('counter', counter.name, counter.help, () => this.all.map((s) => ({ value: s.count, labels: s.labels }))));
    register(view('histogram', histogram.name, histogram.help, () => this.histogramValues(histogram.name)));
  }

  /**
   * One event of these label values (as many as the label names), lasting `seconds`. A
   * label's values are keys as given: pass each label's values as one type (a status as
   * a number every time, say), or 200 and "200" would be two series.
   */
  record(seconds: number, a: string | number, b?: string | number, c?: string | number): void {
    const s = this.seriesOf(a, b, c);
    let i = 0;
    const bounds = this.bounds;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    s.perBucket[i]! += 1;
    s.sum += seconds;
    s.count += 1;
  }

  private seriesOf(a: string | number, b: string | number | undefined, c: string | number | undefined): Series {
    const n = this.labelNames.length;
    if (n === 1) return (this.root.get(a) as Series | undefined) ?? this.add(this.root, a, [a]);
    let byB = this.root.get(a) as Level | undefined;
    if (!byB) this.root.set(a, (byB = new Map()));
    if (n === 2) return (byB.get(b!) as Series | undefined) ?? this.add(byB, b!, [a, b!]);
    let byC = byB.get(b!) as Level | undefined;
    if (!byC) byB.set(b!, (byC = new Map()));
    return (byC.get(c!) as Series | undefined) ?? this.add(byC, c!, [a, b!, c!]);
  }

  /** Forgets every label set (both views show none until the next event). */
  private reset(): void {
    this.root.clear();
    this.all.length = 0;
  }

  private add(level: Level, key: string | number, values: (string | number)[]): Series {
    const labels: Record<string, string | number> = {};
    this.labelNames.forEach((n, d) => (labels[n] = String(values[d])));
    const s: Series = { labels, perBucket: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
    level.set(key, s);
    this.all.push(s);
    return s;
  }

  /** As prom-client writes a histogram: per label set, the cumulative buckets (`le`), then `_sum` and `_count`. */
  private histogramValues(name: string): MetricValue[] {
    const out: MetricValue[] = [];
    for (const s of this.all) {
      let cumulative = 0;
      this.bounds.forEach((bound, i) => {
        cumulative += s.perBucket[i]!;
        out.push({ value: cumulative, labels: { le: bound, ...s.labels }, metricName: `${name}_bucket` });
      });
      out.push({ value: s.count, labels: { le: '+Inf', ...s.labels }, metricName: `${name}_bucket` });
      out.push({ value: s.sum, labels: s.labels, metricName: `${name}_sum` });
      out.push({ value: s.count, labels: s.labels, metricName: `${name}_count` });
    }
    return out;
  }
}
