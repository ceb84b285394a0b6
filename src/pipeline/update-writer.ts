/**
 * Ingest's group commit: updates of concurrent calls share one transaction, so
 * throughput is not bounded by one durable commit per update.
 */
import { createGroupCommit } from '../group-commit.js';
import type { IngestOutcome, NewUpdate, UpdatesRepo } from '../storage/updates-repo.js';

export function createUpdateWriter(repo: UpdatesRepo, onCommitted: () => void, maxBatch = 500, now = Date.now) {
  return createGroupCommit<NewUpdate, IngestOutcome>((items) => repo.ingest(items, now()), maxBatch, onCommitted);
}

export type UpdateWriter = ReturnType<typeof createUpdateWriter>;
