/**
 * Ingest's writer as the core uses it: the group commit (update-writer.ts), its
 * outcomes counted, and the polls waiting in this process woken by each commit
 * directly rather than only through the bus.
 */
import type { Telemetry } from '../telemetry/metrics.js';
import type { UnitsOfWork } from '../storage/units.js';
import type { OutboxRelay } from './outbox-relay.js';
import type { UpdateWaiters } from './update-waiters.js';
import { createUpdateWriter, type UpdateWriter } from './update-writer.js';

export function createIngestWriter(deps: {
  units: Pick<UnitsOfWork, 'ingestClaiming'>;
  relay: Pick<OutboxRelay, 'nudge' | 'claimUntil' | 'publishClaimed'>;
  waiters: Pick<UpdateWaiters, 'committed'>;
  telemetry: Pick<Telemetry, 'ingested'>;
}): UpdateWriter {
  const { relay, waiters, telemetry } = deps;
  // Each committed batch's outbox messages go to the bus at once: published straight
  // from the commit where the engine answers their ids (claimed by this process as they
  // are written), else by the relay's round, which the commit nudges.
  const groupWriter = createUpdateWriter(deps.units, () => relay.nudge(), undefined, undefined, {
    claimUntil: (now) => relay.claimUntil(now),
    publish: (claimed) => void relay.publishClaimed(claimed),
  });
  return {
    async write(items) {
      const outcomes = await groupWriter.write(items);
      const counts = { stored: 0, duplicate: 0, filtered: 0, rejected: 0 };
      for (const o of outcomes) counts['ok' in o ? 'stored' : 'duplicate' in o ? 'duplicate' : 'filtered' in o ? 'filtered' : 'rejected']++;
      for (const [outcome, n] of Object.entries(counts)) if (n > 0) telemetry.ingested(outcome, n);
      // Polls waiting here are woken directly, not only through the bus.
      waiters.committed(new Set(outcomes.flatMap((o) => ('ok' in o ? [o.ok.botId] : []))));
      return outcomes;
    },
  };
}
