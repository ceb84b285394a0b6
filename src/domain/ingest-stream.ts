/**
 * StreamIngestUpdates: IngestUpdates over one bidirectional stream. Each batch runs
 * through the same ingest as the unary call (its checks, its idempotency keys, the
 * update writer's group commit, so batches in flight together share transactions)
 * and is accounted as a call of its own (ctx.part: metrics, one log line). Batches
 * are acknowledged in the order they came, each with its results or its error alone.
 *
 * Flow control: at most IN_FLIGHT batches are held, from the moment one is read until
 * its acknowledgement has been taken by the transport (which takes the next only once
 * the previous has drained to the caller). With that many held, no further batch is
 * read, and the caller's writes back up through HTTP/2 flow control.
 */
import { ApiError } from '../errors.js';
import type {
  IngestUpdatesRequest,
  IngestUpdatesResponse,
  StreamIngestUpdatesRequest,
  StreamIngestUpdatesResponse,
} from '../gen/botplatform/v1/internal_service.js';
import { toStatusMessage } from '../grpc/status-details.js';
import type { CallContext, InternalPrincipal, InternalRpc, UndecodableMessage } from './rpc.js';

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

export function createIngestStream(
  ingest: (req: IngestUpdatesRequest, ctx: CallContext<InternalPrincipal>) => Promise<IngestUpdatesResponse>,
): InternalRpc['streamIngestUpdates'] {
  return async function* streamIngestUpdates(requests, ctx) {
    const part = ctx.part ?? (<T>(_fields: Record<string, unknown>, fn: () => Promise<T>) => fn());

    /** One batch to its acknowledgement; never rejects (an error is the batch's own). */
    async function acknowledge(batch: StreamIngestUpdatesRequest | UndecodableMessage): Promise<StreamIngestUpdatesResponse> {
      const sequence = isUndecodable(batch) ? sequenceOf(batch) : batch.sequence;
      try {
        const response = await part({ sequence, updates: isUndecodable(batch) ? undefined : batch.updates.length }, () => {
          if (isUndecodable(batch)) throw batch.error;
          return ingest({ updates: batch.updates }, ctx);
        });
        return { sequence, results: response.results, error: undefined };
      } catch (err) {
        return { sequence, results: [], error: toStatusMessage(ApiError.from(err)) };
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
