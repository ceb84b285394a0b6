/**
 * Ingest's group commit: updates of concurrent calls share one transaction, so
 * throughput is not bounded by one durable commit per update.
 */
import { NO_DELIVERY, UPDATES_TOPIC } from '../bus/topics.js';
import { createGroupCommit } from '../group-commit.js';
import type { NewOutboxMessage } from '../storage/outbox-repo.js';
import type { ClaimedOutbox, IngestOutcome, NewUpdate, UnitsOfWork } from '../storage/units.js';
import type { StoredUpdate } from '../storage/updates-repo.js';
import { encodeArrived } from './update-waiters.js';

/**
 * Where a commit's outbox messages go at once: the writer adds them claimed until
 * `claimUntil(now)` and hands them to `publish` once committed (where the engine answers
 * their ids; otherwise they are left to the relay, which onCommitted nudges). With
 * `announce`, no outbox row is written at all: each commit's messages go to it once
 * committed (a bus no more durable than this process, whose subscribers read the database
 * when they start: the embedded default's in-process bus).
 *
 * `stored` is told of every bot with updates in the commit, and how to get a bot's updates
 * of it (as stored): this process's waiters, which answer from them. The messages `publish`
 * hands to the bus carry each polling bot's updates of the commit (encodeArrived's) in place
 * of NO_DELIVERY, for the long polls of other processes to answer from; the outbox row keeps
 * NO_DELIVERY (what the relay publishes if this process does not). `announce`'s do not: on
 * the in-process bus the only long polls are this process's, told by `stored` first.
 */
export interface DirectPublish {
  claimUntil(now: number): number;
  publish(claimed: ClaimedOutbox): void;
  announce?(messages: NewOutboxMessage[]): void;
  stored?(botIds: Iterable<string>, updatesOf: (botId: string) => readonly StoredUpdate[] | undefined): void;
}

/**
 * A commit publishes directly only when the one before it began at least this long before
 * (ms): a wake-up after a quiet spell goes out from its commit, while sustained writes leave
 * their messages to the relay's rounds, whose linger carries several commits per publish.
 */
const DIRECT_AFTER_QUIET_MS = 50;

/** Tells of each commit (its start, `at`) whether it began DIRECT_AFTER_QUIET_MS or more after the one before. */
export function quietCommits(): (at: number) => boolean {
  let lastCommitAt = -Infinity;
  return (at) => {
    const quiet = at - lastCommitAt >= DIRECT_AFTER_QUIET_MS;
    lastCommitAt = at;
    return quiet;
  };
}

/** A commit's stored updates by bot, and each bot's as another process's waiters get them (encodeArrived, made when first asked). */
function arrivalsOf(outcomes: IngestOutcome[]) {
  const byBot = new Map<string, StoredUpdate[]>();
  for (const o of outcomes) {
    if (!('ok' in o)) continue;
    const list = byBot.get(o.ok.botId);
    if (list) list.push(o.ok);
    else byBot.set(o.ok.botId, [o.ok]);
  }
  const texts = new Map<string, string | undefined>();
  const arrived = (botId: string): string | undefined => {
    if (texts.has(botId)) return texts.get(botId);
    const updates = byBot.get(botId);
    const text = updates && encodeArrived(updates);
    texts.set(botId, text);
    return text;
  };
  return { bots: byBot.keys(), updatesOf: (botId: string) => byBot.get(botId), arrived };
}

/** The messages with each polling bot's NO_DELIVERY replaced by what arrived for it. */
const carrying = <M extends NewOutboxMessage>(messages: M[], arrived: (botId: string) => string | undefined): M[] =>
  messages.map((m) => {
    const text = m.topic === UPDATES_TOPIC && m.payload === NO_DELIVERY ? arrived(m.key) : undefined;
    return text === undefined ? m : { ...m, payload: text };
  });

export function createUpdateWriter(
  units: Pick<UnitsOfWork, 'ingestClaiming'>, onCommitted: () => void, maxBatch = 2000, now = Date.now, direct?: DirectPublish,
) {
  const quietAt = quietCommits();
  return createGroupCommit<NewUpdate, IngestOutcome>(async (items) => {
    const at = now();
    const quiet = quietAt(at);
    if (direct?.announce) {
      const { outcomes, announce } = await units.ingestClaiming(items, at, 'announce');
      const { bots, updatesOf } = arrivalsOf(outcomes);
      direct.stored?.(bots, updatesOf);
      if (announce) direct.announce(announce);
      return outcomes;
    }
    const { outcomes, claimed } = await units.ingestClaiming(items, at, quiet ? direct?.claimUntil(at) : undefined);
    if (!direct) {
      onCommitted();
      return outcomes;
    }
    const { bots, updatesOf, arrived } = arrivalsOf(outcomes);
    if (claimed) direct.publish({ ids: claimed.ids, messages: carrying(claimed.messages, arrived) });
    else onCommitted();
    direct.stored?.(bots, updatesOf);
    return outcomes;
  }, { maxBatch });
}

export type UpdateWriter = ReturnType<typeof createUpdateWriter>;
