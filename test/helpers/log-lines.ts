/** A destination for the service's logger that keeps every JSON line it writes, as text and parsed. */
import { Writable } from 'node:stream';

export function collectLogLines() {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) {
        raw.push(l);
        lines.push(JSON.parse(l));
      }
      done();
    },
  });
  return { sink, lines, raw };
}
