/**
 * Ingest's group commit: updates of concurrent calls share one transaction, so
 * throughput is not bounded by one durable commit per update.
 */
import { createGroupCommit } from '../group-commit.js';
import type { ClaimedOutbox, IngestOutcome, NewUpdate, UnitsOfWork } from '../storage/units.js';

/**
 * Where a commit's outbox messages go at once: the writer adds them claimed until
 * `claimUntil(now)` and hands them to `publish` once committed (where the engine answers
 * their ids; otherwise they are left to the relay, which onCommitted nudges).
 */
export interface DirectPublish {
  claimUntil(now: number): number;
  publish(claimed: ClaimedOutbox): void;
}

export function createUpdateWriter(
  units: Pick<UnitsOfWork, 'ingestClaiming'>, onCommitted: () => void, maxBatch = 2000, now = Date.now, direct?: DirectPublish,
) {
  return createGroupCommit<NewUpdate, IngestOutcome>(async (items) => {
    const at = now();
    const { outcomes, claimed } = await units.ingestClaiming(items, at, direct?.claimUntil(at));
    if (claimed) direct!.publish(claimed);
    else onCommitted();
    return outcomes;
  }, { maxBatch });
}

export type UpdateWriter = ReturnType<typeof createUpdateWriter>;
