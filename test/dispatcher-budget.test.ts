/**
 * The dispatcher's in-flight budget with many more bots due than it has slots: every bot
 * is served, and the work per delivery stays flat. With 100,000 webhook bots each freed
 * slot kicked every waiting bot again, so a round of limit reads ran per bot per freed
 * slot and the dispatcher thread delivered nothing (bench:webhooks-scale, issue 34's run).
 * The dispatcher here runs on its real code over in-memory stand-ins of its storage, bus
 * and attempts, whose answers take a turn of the event loop as a webhook's would.
 */
import { describe, expect, it } from 'vitest';
import { createDispatcher } from '../src/dispatch/dispatcher.js';
import type { LeasedDelivery } from '../src/storage/deliveries-repo.js';
import { dispatcherStandIns } from './helpers/dispatcher-stand-ins.js';

describe('the dispatcher with many more bots due than budget', () => {
  it('delivers every bot once, with limit reads in proportion to the bots, not to bots × freed slots', async () => {
    const BOTS = 20_000;
    const BUDGET = 16;
    const due = new Set(Array.from({ length: BOTS }, (_, i) => `bot${i}`));
    const delivered: string[] = [];
    let limitReads = 0;
    const { deps, wake } = dispatcherStandIns({
      claim(free) {
        const out: LeasedDelivery[] = [];
        for (const [botId] of free) {
          if (!due.has(botId)) continue;
          due.delete(botId);
          out.push({ id: `d-${botId}`, botId, leaseToken: 't', webhook: null } as unknown as LeasedDelivery);
        }
        return out;
      },
      limitsOf(ids) {
        limitReads += ids.length;
        return new Map(ids.map((id) => [id, { max: 1, perSecond: null }]));
      },
      attempt: (d) => new Promise((resolve) => setImmediate(() => {
        delivered.push(d.botId);
        resolve('succeeded');
      })),
    });

    const dispatcher = createDispatcher({ ...deps, timeoutMs: 15_000, maxInFlight: BUDGET, sweepMs: 60_000 });
    await dispatcher.start();
    wake([...due]);
    for (let i = 0; i < 600 && delivered.length < BOTS; i++) await new Promise((r) => setTimeout(r, 50));
    await dispatcher.stop();

    expect(delivered.length).toBe(BOTS);
    expect(new Set(delivered).size).toBe(BOTS);
    // Each bot's limits are read when it gets a slot (and again when its cached read goes
    // stale): a few reads per bot, where kicking every waiting bot per freed slot reads
    // about BOTS / BUDGET times as many.
    expect(limitReads).toBeLessThan(3 * BOTS);
  }, 60_000);
});
