/**
 * The dispatcher's claims per origin: with many bots behind one endpoint, it claims no more
 * than that origin's turns (perOrigin, the webhook client's WEBHOOK_SOCKETS_PER_ORIGIN) and
 * half as many again, instead of its whole budget (the rest waited at the client holding
 * their leases); every delivery still goes, once, in each bot's order, and a bot behind
 * another origin is not held up by the busy one.
 * The dispatcher runs on its real code over in-memory stand-ins of its storage, bus and
 * attempts, whose answers take a few milliseconds as a webhook's would.
 */
import { describe, expect, it } from 'vitest';
import { createDispatcher } from '../src/dispatch/dispatcher.js';
import { originOf } from '../src/dispatch/webhook-client.js';
import type { LeasedDelivery } from '../src/storage/deliveries-repo.js';
import { dispatcherStandIns } from './helpers/dispatcher-stand-ins.js';

describe('the dispatcher with many bots behind one origin', () => {
  it('claims for the origin about its turns, delivers everything once in order, and does not hold up another origin', async () => {
    const BOTS = 300;
    const EACH = 4;
    const PER_ORIGIN = 8;
    const urlOf = (botId: string) => (botId === 'other' ? 'https://other.example/hook' : `https://shared.example:8443/hook/${botId}`);
    // Each bot's due deliveries, in update_seq order.
    const due = new Map<string, number[]>();
    for (let i = 0; i < BOTS; i++) due.set(`bot${i}`, Array.from({ length: EACH }, (_, k) => k));
    const delivered = new Map<string, number[]>();
    let atShared = 0;
    let mostAtShared = 0;
    let sharedDone = 0;
    let otherAfter = -1;
    const { deps, wake } = dispatcherStandIns({
      claim(free) {
        const out: LeasedDelivery[] = [];
        for (const [botId, n] of free) {
          const seqs = due.get(botId) ?? [];
          for (const seq of seqs.splice(0, n)) out.push({ id: `${botId}-${seq}`, botId, updateSeq: seq, leaseToken: 't', webhook: null } as unknown as LeasedDelivery);
        }
        return out;
      },
      limitsOf: (ids) => new Map(ids.map((id) => [id, { max: 40, perSecond: null, url: urlOf(id), allowedIps: [] }])),
      attempt: (d) => {
        const shared = d.botId !== 'other';
        if (shared) mostAtShared = Math.max(mostAtShared, ++atShared);
        else otherAfter = sharedDone;
        return new Promise((resolve) => setTimeout(() => {
          if (shared) {
            atShared--;
            sharedDone++;
          }
          delivered.set(d.botId, [...(delivered.get(d.botId) ?? []), (d as LeasedDelivery & { updateSeq: number }).updateSeq]);
          resolve('succeeded');
        }, 2));
      },
    });

    const dispatcher = createDispatcher({
      ...deps, timeoutMs: 15_000, maxInFlight: 1000, sweepMs: 60_000, perOrigin: PER_ORIGIN, originOf,
    });
    await dispatcher.start();
    wake([...due.keys()]);
    // The busy origin is saturated: then a bot behind another one gets an update.
    for (let i = 0; i < 200 && sharedDone < 50; i++) await new Promise((r) => setTimeout(r, 5));
    due.set('other', [0]);
    wake(['other']);
    const total = BOTS * EACH + 1;
    const count = () => [...delivered.values()].reduce((n, l) => n + l.length, 0);
    for (let i = 0; i < 600 && count() < total; i++) await new Promise((r) => setTimeout(r, 50));
    await dispatcher.stop();

    expect(count()).toBe(total);
    for (let i = 0; i < BOTS; i++) expect(delivered.get(`bot${i}`)).toEqual([0, 1, 2, 3]);
    expect(delivered.get('other')).toEqual([0]);
    // Its whole budget (1,000) for the shared origin before; now its turns and half as many again.
    expect(mostAtShared).toBeGreaterThanOrEqual(PER_ORIGIN);
    expect(mostAtShared).toBeLessThanOrEqual(PER_ORIGIN * 1.5);
    // The other origin's bot went at once, not after the shared origin's backlog (1,150 more).
    expect(otherAfter).toBeLessThan(sharedDone / 4);
  }, 60_000);
});
