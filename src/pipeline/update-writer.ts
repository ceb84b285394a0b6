/**
 * Ingest's group commit: updates of concurrent calls share one transaction, so
 * throughput is not bounded by one durable commit per update.
 */
import { createGroupCommit } from '../group-commit.js';
import type { NewOutboxMessage } from '../storage/outbox-repo.js';
import type { ClaimedOutbox, IngestOutcome, NewUpdate, UnitsOfWork } from '../storage/units.js';

/**
 * Where a commit's outbox messages go at once: the writer adds them claimed until
 * `claimUntil(now)` and hands them to `publish` once committed (where the engine answers
 * their ids; otherwise they are left to the relay, which onCommitted nudges). With
 * `announce`, no outbox row is written at all: each commit's messages go to it once
 * committed (a bus no more durable than this process, whose subscribers read the database
 * when they start: the embedded default's in-process bus).
 */
export interface DirectPublish {
  claimUntil(now: number): number;
  publish(claimed: ClaimedOutbox): void;
  announce?(messages: NewOutboxMessage[]): void;
}

/**
 * A commit publishes directly only when the one before it began at least this long before
 * (ms): a wake-up after a quiet spell goes out from its commit, while sustained writes leave
 * their messages to the relay's rounds, whose linger carries several commits per publish.
 */
const DIRECT_AFTER_QUIET_MS = 50;

export function createUpdateWriter(
  units: Pick<UnitsOfWork, 'ingestClaiming'>, onCommitted: () => void, maxBatch = 2000, now = Date.now, direct?: DirectPublish,
) {
  let lastCommitAt = -Infinity;
  return createGroupCommit<NewUpdate, IngestOutcome>(async (items) => {
    const at = now();
    const quiet = at - lastCommitAt >= DIRECT_AFTER_QUIET_MS;
    lastCommitAt = at;
    if (direct?.announce) {
      const { outcomes, announce } = await units.ingestClaiming(items, at, undefined, true);
      if (announce) direct.announce(announce);
      return outcomes;
    }
    const { outcomes, claimed } = await units.ingestClaiming(items, at, quiet ? direct?.claimUntil(at) : undefined);
    if (claimed) direct!.publish(claimed);
    else onCommitted();
    return outcomes;
  }, { maxBatch });
}

export type UpdateWriter = ReturnType<typeof createUpdateWriter>;
