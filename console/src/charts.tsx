import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

interface Series { label: string; values: (number | null)[]; color: string }

/** A time-series line chart (uPlot: small, no dependencies, canvas). */
export function LineChart({ x, series }: { x: number[]; series: Series[] }) {
  const el = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  const labels = series.map((s) => s.label).join(',');
  useEffect(() => {
    const width = () => Math.max(260, (el.current?.clientWidth ?? 600) - 4);
    plot.current = new uPlot({
      width: width(),
      height: 200,
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, spanGaps: true }))],
      axes: [{}, { size: 50 }],
      scales: { x: { time: true } },
      legend: { live: false },
    }, [x, ...series.map((s) => s.values)] as uPlot.AlignedData, el.current!);
    const onResize = () => plot.current?.setSize({ width: width(), height: 200 });
    addEventListener('resize', onResize);
    return () => {
      removeEventListener('resize', onResize);
      plot.current?.destroy();
    };
  }, [labels]);
  useEffect(() => {
    plot.current?.setData([x, ...series.map((s) => s.values)] as uPlot.AlignedData);
  });
  // What is drawn, for tests and tools: the points and the time they span (seconds).
  const span = x.length > 1 ? x[x.length - 1]! - x[0]! : 0;
  return <div ref={el} class="chart" role="img" aria-label={`Chart of ${labels}`} data-points={x.length} data-span={span} />;
}

/** Horizontal bars for a small map of counts. */
export function Bars({ data, kind }: { data: Record<string, number>; kind?: 'error' }) {
  const entries = Object.entries(data).sort((a, b) => b[1] - a[1]);
  if (entries.length === 0) return <p class="muted">None in the window.</p>;
  const max = Math.max(...entries.map((e) => e[1]));
  return (
    <table class="bars">
      <tbody>
        {entries.map(([k, v]) => (
          <tr key={k}>
            <th scope="row">{k}</th>
            <td><span class={`bar ${kind ?? ''}`} style={{ width: `${Math.max(2, (v / max) * 100)}%` }} /></td>
            <td class="num">{v}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
