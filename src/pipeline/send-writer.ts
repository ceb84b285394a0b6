/**
 * The send methods' group commit: messages sent by concurrent calls (any bots) share
 * one transaction — their chats read, one lock of each bot's row, one multi-row insert
 * into messages, outbox and feed — so a busy bot does not pay a transaction per message.
 * A batch starts after the current event-loop turn, so that calls whose requests arrived
 * together share it.
 *
 * Its outbox messages go to the bus as ingest's do (update-writer.ts): a commit adds them
 * claimed by this process and hands them to the relay to publish at once
 * (`publishClaimed`, where the engine answers their ids) after a quiet spell. Otherwise the
 * relay's rounds take them: the commit nudges it. With `announce` (the embedded default's
 * in-process bus) no outbox row is written at all: each commit's messages go to it once
 * committed, as ingest's (ingest.ts). `committed` is told of each commit.
 */
import { createGroupCommit } from '../group-commit.js';
import type { NewOutboxMessage } from '../storage/outbox-repo.js';
import type { SendItem, UnitsOfWork } from '../storage/units.js';
import type { OutboxRelay } from './outbox-relay.js';
import { quietCommits } from './update-writer.js';

export function createSendWriter(deps: {
  units: Pick<UnitsOfWork, 'sendMessages'>;
  relay: Pick<OutboxRelay, 'nudge' | 'claimUntil' | 'publishClaimed'>;
  committed?: () => void;
  announce?: (messages: NewOutboxMessage[]) => void;
  maxBatch?: number;
  now?: () => number;
}) {
  const { units, relay, committed } = deps;
  const now = deps.now ?? Date.now;
  const quietAt = quietCommits();
  const commit = createGroupCommit<SendItem, Record<string, unknown> | undefined>(async (items) => {
    const at = now();
    if (deps.announce) {
      const { answers, announce } = await units.sendMessages(items, at, 'announce');
      if (announce) deps.announce(announce);
      return answers;
    }
    // quietAt is asked on every commit: it keeps the last commit's start.
    const quiet = quietAt(at);
    const { answers, claimed } = await units.sendMessages(items, at, quiet ? relay.claimUntil(at) : undefined);
    if (claimed) void relay.publishClaimed(claimed);
    else relay.nudge();
    return answers;
  }, { maxBatch: deps.maxBatch ?? 200, onCommitted: committed, gather: 'turn' });
  return {
    /** Resolves with the message as stored, once committed; undefined if its chat has not written to its bot. */
    async send(item: SendItem): Promise<Record<string, unknown> | undefined> {
      return (await commit.write([item]))[0];
    },
    /** Several messages together (an album): in one batch, a bot's in the order given with consecutive ids. */
    async sendMany(items: SendItem[]): Promise<(Record<string, unknown> | undefined)[]> {
      return commit.write(items);
    },
  };
}

export type SendWriter = ReturnType<typeof createSendWriter>;
