/** Keeps resident memory flat while large files stream through (both blob stores use it). */
import { Transform } from 'node:stream';
import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * A young-generation collection. Each chunk read from a socket is a fresh buffer
 * outside the V8 heap, which V8 frees only when it next collects, and it lets tens
 * of megabytes of them pile up first. A large upload is nothing but such chunks,
 * so every GC_EVERY bytes it asks for a scavenge (about a millisecond): resident
 * memory then stays flat, whatever the file size.
 */
v8.setFlagsFromString('--expose-gc');
const collectYoung = vm.runInNewContext('gc') as (options: { type: 'minor' }) => void;
const GC_EVERY = 8 * 1024 * 1024;

/** Passes chunks through, scavenging every GC_EVERY bytes (see collectYoung). */
export function scavenging(): Transform {
  let since = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      since += chunk.length;
      if (since >= GC_EVERY) {
        since = 0;
        collectYoung({ type: 'minor' });
      }
      done(null, chunk);
    },
  });
}
