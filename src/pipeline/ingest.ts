/**
 * Ingest's writer as the core uses it: the group commit (update-writer.ts), its
 * outcomes counted, and the polls waiting in this process woken by each commit
 * directly rather than only through the bus.
 */
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.js';
import type { Telemetry } from '../telemetry/metrics.js';
import type { UnitsOfWork } from '../storage/units.js';
import { announceOn, type OutboxRelay } from './outbox-relay.js';
import type { UpdateWaiters } from './update-waiters.js';
import { createUpdateWriter, type UpdateWriter } from './update-writer.js';

export function createIngestWriter(deps: {
  units: Pick<UnitsOfWork, 'ingestClaiming'>;
  relay: Pick<OutboxRelay, 'nudge' | 'claimUntil' | 'publishClaimed'>;
  waiters: Pick<UpdateWaiters, 'committed'>;
  telemetry: Pick<Telemetry, 'ingested'>;
  /**
   * Set on the embedded default (SQLite, the in-process bus): each commit's announcements go
   * to this bus straight from the commit, with no outbox row. That bus ends with the process
   * and every subscriber of it (long polls, the dispatcher and its threads) reads the
   * database when it starts, so a row kept for after a crash would be published to no one
   * who needs it.
   */
  inProcessBus?: Pick<Bus, 'publish'>;
  logger?: Pick<Logger, 'warn'>;
}): UpdateWriter {
  const { relay, waiters, telemetry, inProcessBus } = deps;
  // Each committed batch's outbox messages go to the bus at once: published straight
  // from the commit where the engine answers their ids (claimed by this process as they
  // are written), else by the relay's round, which the commit nudges. Polls waiting here
  // are woken by each commit directly, not only through the bus, with what arrived.
  const groupWriter = createUpdateWriter(deps.units, () => relay.nudge(), undefined, undefined, {
    claimUntil: (now) => relay.claimUntil(now),
    publish: (claimed) => void relay.publishClaimed(claimed),
    stored: (botIds, arrived) => waiters.committed(botIds, arrived),
    ...(inProcessBus ? { announce: announceOn(inProcessBus, deps.logger, 'updates') } : {}),
  });
  return {
    async write(items) {
      const outcomes = await groupWriter.write(items);
      const counts = { stored: 0, duplicate: 0, filtered: 0, rejected: 0 };
      for (const o of outcomes) counts['ok' in o ? 'stored' : 'duplicate' in o ? 'duplicate' : 'filtered' in o ? 'filtered' : 'rejected']++;
      for (const [outcome, n] of Object.entries(counts)) if (n > 0) telemetry.ingested(outcome, n);
      return outcomes;
    },
  };
}
