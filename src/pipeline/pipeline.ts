/**
 * The core's update pipeline in this process: the outbox relay (committed messages to
 * the bus), the long polls waiting here, and their recheck of the database while the
 * bus cannot be trusted to announce what other instances commit.
 */
import type { Bus } from '../bus/bus.js';
import { every } from '../every.js';
import type { Root } from '../process.js';
import type { OutboxRepo } from '../storage/outbox-repo.js';
import { createOutboxRelay, type OutboxRelay } from './outbox-relay.js';
import { createUpdateWaiters, type UpdateWaiters } from './update-waiters.js';

export interface Pipeline {
  relay: OutboxRelay;
  waiters: UpdateWaiters;
  /** Why this core is degraded (serving, but the relay cannot publish or the bus delivers nothing), if it is. */
  degraded(): string[];
}

/** Starts the relay, then the long polls, then their recheck; each joins the shutdown in its phase. */
export async function startPipeline({ config, logger, telemetry, shutdown }: Root, deps: { outbox: OutboxRepo; bus: Bus }): Promise<Pipeline> {
  const { outbox, bus } = deps;
  const relay = createOutboxRelay(outbox, bus, logger, { lingerMs: config.outboxLingerMs, onFailure: () => telemetry.relayFailure() });
  relay.start();
  shutdown.add('relay', 'outbox relay', () => relay.stop());
  const degraded = () => [relay.problem(), bus.problem?.()].filter((r): r is string => Boolean(r));

  // Long polls waiting in this process: they answer at once when shutdown reaches them.
  const waiters = createUpdateWaiters(bus, logger);
  await waiters.start();
  telemetry.gauge('botplatform_long_polls_open', 'getUpdates calls waiting in this process', () => waiters.size());
  telemetry.gauge('botplatform_outbox_backlog', 'Outbox messages committed but not yet published to the bus',
    () => outbox.backlog().catch(() => NaN));
  shutdown.add('long-polls', 'long polls', async () => waiters.close());

  // While the bus is degraded (and a while after), waiting polls re-read the database
  // every second: updates committed by other instances may never be announced to them.
  let recheckUntil = 0;
  shutdown.add('timers', 'long-poll recheck', every(1000, async () => {
    if (degraded().length > 0) recheckUntil = Date.now() + 5000;
    if (Date.now() < recheckUntil) waiters.recheckAll();
  }, logger, 'long-poll recheck'));

  return { relay, waiters, degraded };
}
