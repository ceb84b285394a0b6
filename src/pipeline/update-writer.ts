/**
 * Ingest's group commit: updates of concurrent calls share one transaction, so
 * throughput is not bounded by one durable commit per update.
 */
import { createGroupCommit } from '../group-commit.js';
import type { IngestOutcome, NewUpdate, UnitsOfWork } from '../storage/units.js';

export function createUpdateWriter(units: Pick<UnitsOfWork, 'ingest'>, onCommitted: () => void, maxBatch = 2000, now = Date.now) {
  return createGroupCommit<NewUpdate, IngestOutcome>((items) => units.ingest(items, now()), { maxBatch, onCommitted });
}

export type UpdateWriter = ReturnType<typeof createUpdateWriter>;
