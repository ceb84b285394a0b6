/**
 * The send methods' group commit: messages sent by concurrent calls (any bots) share
 * one transaction — one lock of each bot's row, one multi-row insert into messages,
 * outbox and feed — so a busy bot does not pay a transaction per message. A batch
 * starts after the current event-loop turn, so that calls whose requests arrived
 * together share it.
 */
import { createGroupCommit } from '../group-commit.js';
import type { SendItem, UnitsOfWork } from '../storage/units.js';

export function createSendWriter(units: Pick<UnitsOfWork, 'sendMessages'>, onCommitted: () => void, maxBatch = 200, now = Date.now) {
  const commit = createGroupCommit<SendItem, Record<string, unknown>>((items) => units.sendMessages(items, now()), { maxBatch, onCommitted, gather: 'turn' });
  return {
    /** Resolves with the message as stored, once committed. */
    async send(item: SendItem): Promise<Record<string, unknown>> {
      return (await commit.write([item]))[0]!;
    },
    /** Several messages together (an album): in one batch, a bot's in the order given with consecutive ids. */
    async sendMany(items: SendItem[]): Promise<Record<string, unknown>[]> {
      return commit.write(items);
    },
  };
}

export type SendWriter = ReturnType<typeof createSendWriter>;
