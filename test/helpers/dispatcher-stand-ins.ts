/**
 * In-memory stand-ins for what the dispatcher reads and calls (its deliveries and webhooks
 * storage, the attempts, the bus), for tests that run its real code on scenarios of their
 * own: each test says how a claim answers, what limits its bots have and how an attempt goes.
 */
import pino from 'pino';
import type { Attempts } from '../../src/dispatch/attempts.js';
import type { DispatcherOptions } from '../../src/dispatch/dispatcher.js';
import type { Bus } from '../../src/bus/bus.js';
import type { DeliveriesRepo, LeasedDelivery } from '../../src/storage/deliveries-repo.js';
import type { DeliveryLimits, WebhooksRepo } from '../../src/storage/webhooks-repo.js';

export function dispatcherStandIns(parts: {
  /** The deliveries a claim leases, given each bot's free slots. */
  claim(free: Map<string, number>): LeasedDelivery[];
  limitsOf(ids: string[]): Map<string, DeliveryLimits>;
  attempt(d: LeasedDelivery): ReturnType<Attempts['attempt']>;
}): { deps: Pick<DispatcherOptions, 'deliveries' | 'webhooks' | 'attempts' | 'bus' | 'logger'>; wake(keys: string[]): void } {
  let woken: ((keys: string[]) => void) | undefined;
  const deliveries = {
    claimForBots: async ({ free }: { free: Map<string, number> }) => parts.claim(free),
    botsWithDue: async () => [],
    renewLeases: async () => 0,
  } as unknown as DeliveriesRepo;
  const webhooks = { limitsOf: async (ids: string[]) => parts.limitsOf(ids) } as unknown as WebhooksRepo;
  const attempts = { attempt: (d: LeasedDelivery) => parts.attempt(d) } as unknown as Attempts;
  const bus = {
    async subscribeGroup(_group: string, _topics: string[], handler: (keys: string[]) => void) {
      woken = handler;
    },
  } as unknown as Bus;
  return {
    deps: { deliveries, webhooks, attempts, bus, logger: pino({ level: 'silent' }) },
    /** What the bus's handler is told: these bots have new deliveries (once the dispatcher started). */
    wake: (keys) => woken!(keys),
  };
}
