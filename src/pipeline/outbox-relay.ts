/**
 * Publishes committed outbox messages to the bus and deletes them once the bus has
 * them: at least once, oldest first. Nudged right after each commit (every writer of
 * the outbox nudges its own process's relay: ingest and sends); also polls, so messages
 * left by a process that died after its commit go out too. The poll is every `pollMs`
 * while this relay has had work recently, and every `idlePollMs` once a few rounds
 * in a row found nothing and no commit nudged it: an idle core asks the database a
 * few times a minute instead of four times a second, and what its own writers commit
 * still goes out at once (the nudge ends the wait).
 *
 * Under sustained writes (a round published something and more commits nudged it
 * meanwhile), the next round waits `lingerMs` first, as a Kafka producer's linger.ms:
 * one publish then carries what several rounds would have (each round costs a claim, a
 * publish and a delete, whatever it carries). A commit after a quiet spell still goes
 * out at once: only a round that follows a busy one lingers.
 *
 * A writer whose engine answers the ids of its inserts (MariaDB) adds its outbox rows
 * already claimed by this process (until `claimUntil`) and hands them here once
 * committed (`publishClaimed`): they go to the bus at once, without the claim's
 * transaction on the way, one publish at a time (those committed meanwhile share the
 * next, which waits `lingerMs` first when they did, as a busy round does), and are deleted
 * after (deletes gathered for 20 ms). A publish that fails gives them back for the next round
 * (any relay's); a core that dies before its publish leaves them claimed until the claim
 * lapses, `publishTimeoutMs` + 2 s after the commit began, then any relay's poll takes them.
 *
 * The bus is not the system of record: a batch is claimed in a short transaction,
 * published outside any transaction (with a time limit), then deleted. While the bus
 * is down, ingest goes on committing (the outbox grows), the relay retries with a
 * short backoff and reports itself degraded, and catches up when the bus returns.
 */
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.js';
import { createGroupCommit } from '../group-commit.js';
import type { NewOutboxMessage, OutboxRepo } from '../storage/outbox-repo.js';
import { Slots } from '../slots.js';

/** An outbox message as the bus takes it. */
export const busMessageOf = (m: NewOutboxMessage) => ({ topic: m.topic, key: m.key, value: m.payload });

/**
 * The embedded default's way to the bus: a commit's messages published straight to its
 * in-process `bus` once committed, with no outbox row (ingest's and sends', ingest.ts and
 * core/build.ts); a failure is logged as `what` not announced.
 */
export function announceOn(bus: Pick<Bus, 'publish'>, logger: Pick<Logger, 'warn'> | undefined, what: string) {
  return (messages: NewOutboxMessage[]): void => {
    bus.publish(messages.map(busMessageOf)).catch((err) => logger?.warn({ err }, `${what} not announced on the in-process bus`));
  };
}

export interface OutboxRelayOptions {
  /** The poll's interval while the relay has had work recently. */
  pollMs?: number;
  /** The poll's interval once IDLE_ROUNDS rounds in a row found nothing without a nudge (a dead writer's rows wait at most this long). */
  idlePollMs?: number;
  batch?: number;
  /** Under sustained writes, how long a round waits after a busy one, to carry more (0: none). */
  lingerMs?: number;
  /** A publish not acknowledged within this long counts as failed (the batch goes out again). */
  publishTimeoutMs?: number;
  /** Longest wait between attempts while publishing fails. */
  maxBackoffMs?: number;
  /** Told of each failed publish (a counter in /metrics). */
  onFailure?: () => void;
  /** Told when publishing works again after failing. */
  onRecovered?: () => void;
}

/** How long deletes of directly published messages gather before one statement takes them. */
const DELETE_GATHER_MS = 20;

/** Empty, unnudged rounds in a row (a second at the default pollMs) before the relay polls at idlePollMs. */
const IDLE_ROUNDS = 4;

export function createOutboxRelay(repo: OutboxRepo, bus: Bus, logger: Logger, opts: OutboxRelayOptions = {}) {
  const pollMs = opts.pollMs ?? 250;
  const idlePollMs = Math.max(pollMs, opts.idlePollMs ?? 2000);
  const batch = opts.batch ?? 500;
  const lingerMs = opts.lingerMs ?? 0;
  const publishTimeoutMs = opts.publishTimeoutMs ?? 3000;
  const maxBackoffMs = opts.maxBackoffMs ?? 1000;
  // A claim outlives a publish attempt, so two relays do not publish one batch at once.
  const leaseMs = publishTimeoutMs * 2 + 5000;
  let running = false;
  let wake: (() => void) | null = null;
  let nudged = false;
  /** A nudge's wake-up is scheduled for the next turn of the event loop. */
  let scheduled = false;
  let loop: Promise<void> | null = null;
  /** Why the last publish failed, while it keeps failing. */
  let failing: { reason: string; since: number } | null = null;
  /** How long a writer's own claim (publishClaimed) lasts from its commit's start. */
  const writerLeaseMs = publishTimeoutMs + 2000;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = null;
        resolve();
      }
      wake = done;
    });

  function publishWithin(messages: { topic: string; key: string; value: string }[]): Promise<void> {
    let timer: NodeJS.Timeout;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`bus did not acknowledge within ${publishTimeoutMs} ms`)), publishTimeoutMs);
    });
    return Promise.race([bus.publish(messages), timeout]).finally(() => clearTimeout(timer));
  }

  /** One round: claim, publish, delete. Returns how many messages went out. */
  async function round(): Promise<number> {
    const claimed = await repo.claim(batch, Date.now(), leaseMs);
    if (claimed.length === 0) return 0;
    const ids = claimed.map((m) => m.id);
    try {
      await publishWithin(claimed.map(busMessageOf));
    } catch (err) {
      // Back to the outbox at once: the next attempt (any relay's) takes them again.
      await repo.release(ids).catch(() => {});
      throw Object.assign(err as Error, { relayStage: 'publish' });
    }
    if (failing) {
      logger.info({ downForMs: Date.now() - failing.since }, 'outbox relay: publishing again');
      failing = null;
      opts.onRecovered?.();
    }
    // Published: a failure to delete only means they go out again after the claim lapses.
    await repo.delete(ids);
    return claimed.length;
  }

  // Messages committed already claimed by this process: published one publish at a time
  // (what is committed meanwhile goes in the next), then deleted, off every path that
  // waits: each delete gathers what the next DELETE_GATHER_MS brings.
  const deleting = createGroupCommit<number, void>(async (ids) => {
    await repo.delete(ids);
    return ids.map(() => undefined);
  }, { gather: DELETE_GATHER_MS });
  /** Whether a direct publish is on its way, and whether more was handed over meanwhile (busy). */
  let directInFlight = false;
  let directArrived = false;
  const publishing = createGroupCommit<{ id: number; message: NewOutboxMessage }, void>(async (items) => {
    const ids = items.map((i) => i.id);
    directInFlight = true;
    directArrived = false;
    try {
      await publishWithin(items.map(({ message }) => busMessageOf(message)));
    } catch (err) {
      // Back to the outbox for the relay's rounds, which retry, back off and report.
      await repo.release(ids).catch(() => {});
      nudge();
      throw err;
    } finally {
      directInFlight = false;
    }
    deleting.write(ids).catch((err) => logger.debug({ err }, 'outbox relay: published messages not deleted; they go out again when their claim lapses'));
    // Busy (more was committed while this publish was on its way): the next publish waits
    // lingerMs first, as the relay's rounds do, so that it carries what several would.
    if (directArrived && lingerMs > 0) await new Promise((r) => setTimeout(r, lingerMs));
    return items.map(() => undefined);
  });
  /** Direct publishes in progress (stop waits for them; Slots, not a Set: see src/slots.ts). */
  const direct = new Slots<Promise<void>>();

  function nudge() {
    nudged = true;
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      wake?.();
    });
  }

  async function run() {
    let backoff = 0;
    /** Rounds in a row that found nothing and were not nudged. */
    let empty = 0;
    while (running) {
      const wasNudged = nudged;
      nudged = false;
      try {
        const n = await round();
        backoff = 0;
        empty = n > 0 || wasNudged ? 0 : empty + 1;
        if (n === batch) continue;
        if (nudged) {
          // Busy: more was committed during this round. Let it gather (a nudge does not cut this short).
          if (n > 0 && lingerMs > 0) await new Promise((r) => setTimeout(r, lingerMs));
          continue;
        }
        await sleep(empty >= IDLE_ROUNDS ? idlePollMs : pollMs);
      } catch (err) {
        const e = err as Error & { relayStage?: string };
        if (e.relayStage === 'publish') {
          opts.onFailure?.();
          if (!failing) failing = { reason: e.message, since: Date.now() };
          else failing.reason = e.message;
        }
        backoff = Math.min(maxBackoffMs, backoff ? backoff * 2 : 100);
        logger.warn({ err, retryInMs: backoff }, e.relayStage === 'publish' ? 'outbox relay: publish failed; will retry' : 'outbox relay: database step failed; will retry');
        if (running) await sleep(backoff);
      }
    }
  }

  return {
    start() {
      running = true;
      loop = run();
    },
    /**
     * Something was committed: publish now rather than at the next poll. Its round starts
     * on the event loop's next turn (setImmediate), after the committing calls' answers
     * (and the polls they woke) have been written: in the same turn, its claim's statements
     * would run between their steps and hold those answers back by a millisecond or more.
     */
    nudge,
    /** Until when a writer committing now claims the outbox messages it will hand to publishClaimed (epoch ms). */
    claimUntil(now: number): number {
      return now + writerLeaseMs;
    },
    /**
     * Outbox messages a commit added claimed until claimUntil (by this process), with their
     * ids, once committed: published now, then deleted. Resolves when published; never rejects
     * (a failed publish leaves them to the relay's rounds).
     */
    publishClaimed(claimed: { ids: number[]; messages: NewOutboxMessage[] }): Promise<void> {
      if (claimed.ids.length === 0) return Promise.resolve();
      if (directInFlight) directArrived = true;
      const done: Promise<void> = publishing.write(claimed.ids.map((id, i) => ({ id, message: claimed.messages[i]! })))
        .then(() => undefined, (err) => logger.debug({ err }, 'outbox relay: direct publish failed; the relay takes it'))
        .finally(() => direct.delete(slot, done));
      const slot = direct.add(done);
      return done;
    },
    /** Why the relay cannot publish, while it cannot; undefined when it can. */
    problem(): string | undefined {
      return failing ? `outbox relay cannot publish since ${new Date(failing.since).toISOString()}: ${failing.reason}` : undefined;
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
      await Promise.allSettled(direct.values());
    },
  };
}

export type OutboxRelay = ReturnType<typeof createOutboxRelay>;
