/**
 * StreamIngestUpdates: IngestUpdates over one bidirectional stream. Each batch runs
 * through the same ingest as the unary call (its checks, its idempotency keys, the
 * update writer's group commit, so batches in flight together share transactions)
 * and is accounted as a call of its own (ctx.part: metrics, one log line). Batches
 * are acknowledged in the order they came, each with its results or its error alone,
 * and stored in that order too: a batch's checks run while earlier batches' do, but it
 * enters the writer only after the batch before it has (so one bot's update_seqs follow
 * the stream even where the checks' reads answer out of order, as on a MySQL pool).
 *
 * Flow control: at most IN_FLIGHT batches are held, from the moment one is read until
 * its acknowledgement has been taken by the transport (which takes the next only once
 * the previous has drained to the caller). With that many held, no further batch is
 * read, and the caller's writes back up through HTTP/2 flow control.
 */
import { ApiError } from '../errors.js';
import type { NewUpdate } from '../storage/units.js';
import type {
  IngestUpdatesRequest,
  IngestUpdatesResponse,
  StreamIngestUpdatesRequest,
  StreamIngestUpdatesResponse,
} from '../gen/botplatform/v1/internal_service.js';
import { toStatusMessage } from '../error-status.js';
import type { InternalRpc, UndecodableMessage } from './rpc.js';

/** Batches read and not yet acknowledged to the transport, at most. */
export const IN_FLIGHT = 16;

/** The field number of StreamIngestUpdatesRequest.sequence (read from a batch that did not decode). */
const SEQUENCE_FIELD = 2;

const isUndecodable = (m: unknown): m is UndecodableMessage =>
  typeof m === 'object' && m !== null && (m as UndecodableMessage).undecodable === true;

/** The sequence a batch that did not decode still shows, when it is in range; else 0. */
function sequenceOf(m: UndecodableMessage): number {
  const raw = m.fields.get(SEQUENCE_FIELD);
  return raw !== undefined && raw >= -BigInt(Number.MAX_SAFE_INTEGER) && raw <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(raw) : 0;
}

/**
 * `check` is ingest's first step (the request checked whole, nothing written), `write` its
 * second (the checked updates queued in the writer's group commit at once, answered once
 * committed): the unary IngestUpdates is the one after the other.
 */
export function createIngestStream(
  check: (req: IngestUpdatesRequest) => Promise<NewUpdate[]>,
  write: (items: NewUpdate[]) => Promise<IngestUpdatesResponse>,
): InternalRpc['streamIngestUpdates'] {
  return async function* streamIngestUpdates(requests, ctx) {
    const part = ctx.part ?? (<T>(_fields: Record<string, unknown>, fn: () => Promise<T>) => fn());
    /** Settles once the latest batch read has entered the writer (or will not). */
    let entered: Promise<void> = Promise.resolve();

    /** One batch to its acknowledgement; never rejects (an error is the batch's own). */
    async function acknowledge(batch: StreamIngestUpdatesRequest | UndecodableMessage): Promise<StreamIngestUpdatesResponse> {
      const sequence = isUndecodable(batch) ? sequenceOf(batch) : batch.sequence;
      const before = entered;
      let enter!: () => void;
      entered = new Promise<void>((resolve) => (enter = resolve));
      try {
        const response = await part({ sequence, updates: isUndecodable(batch) ? undefined : batch.updates.length }, async () => {
          if (isUndecodable(batch)) throw batch.error;
          const items = await check({ updates: batch.updates });
          await before;
          const written = write(items); // queued now: after the batch before, ahead of the next
          enter();
          return written;
        });
        return { sequence, results: response.results, error: undefined };
      } catch (err) {
        return { sequence, results: [], error: toStatusMessage(ApiError.from(err)) };
      } finally {
        enter();
      }
    }

    const held: Promise<StreamIngestUpdatesResponse>[] = [];
    let readerDone = false;
    let readerError: unknown;
    let stopped = false;
    let wakeWriter: (() => void) | undefined;
    let wakeReader: (() => void) | undefined;
    const wake = (which: 'writer' | 'reader') => {
      const fn = which === 'writer' ? wakeWriter : wakeReader;
      if (which === 'writer') wakeWriter = undefined;
      else wakeReader = undefined;
      fn?.();
    };

    const reader = (async () => {
      try {
        for await (const batch of requests) {
          if (stopped) break;
          held.push(acknowledge(batch));
          wake('writer');
          while (held.length >= IN_FLIGHT && !stopped) await new Promise<void>((resolve) => (wakeReader = resolve));
          if (stopped) break;
        }
      } catch (err) {
        readerError = err;
      } finally {
        readerDone = true;
        wake('writer');
      }
    })();

    try {
      for (;;) {
        if (held.length === 0) {
          if (readerDone) break;
          await new Promise<void>((resolve) => (wakeWriter = resolve));
          continue;
        }
        const ack = await held[0]!;
        held.shift();
        wake('reader');
        yield ack;
      }
      if (readerError !== undefined) throw readerError;
    } finally {
      // The caller left (or the transport stopped taking): read nothing more.
      stopped = true;
      wake('reader');
      if (readerDone) await reader;
    }
  };
}
