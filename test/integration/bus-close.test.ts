/**
 * A shutdown is not held by a Kafka rebalance (the integration pass: MariaDB + Kafka). A
 * consumer leaves its group only once the rebalance it is in ends, and the coordinator waits
 * for the slowest member, up to the longest rebalance timeout any member asked for. Here
 * another member of the dispatchers' group (not ours: a raw kafkajs consumer asking for 60 s)
 * is busy in a batch and does not join again; the service's close (its member has handled a
 * batch: a final commit, then its leaving) still ends soon after its SHUTDOWN_TIMEOUT, where
 * it used to wait the minute out.
 */
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { WEBHOOK_UPDATES_TOPIC } from '../../src/bus/topics.js';
import { DISPATCHER_GROUP } from '../../src/dispatch/dispatcher.js';
import { startHarness, type Harness } from '../helpers/harness.js';
import { until } from '../helpers/until.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('shutdown during a Kafka rebalance', () => {
  const consumers: Consumer[] = [];
  let h: Harness | undefined;
  let release: () => void = () => {};
  afterAll(async () => {
    release();
    await h?.close();
    await Promise.allSettled(consumers.map((c) => c.disconnect()));
  });

  it('a member that does not join again holds the close for SHUTDOWN_TIMEOUT at most, not the rebalance timeout', async () => {
    // A group of this test's own.
    const clientId = `bus-close-${process.pid}-${Date.now()}`;
    h = await startHarness('in-process', { KAFKA_CLIENT_ID: clientId, SHUTDOWN_TIMEOUT: '2s', DISPATCHER_THREADS: '0' });
    const kafka = new Kafka({ clientId, brokers: process.env.TEST_KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
    const groupId = `${clientId}-${DISPATCHER_GROUP}`;

    // The busy member: in its batch until released, heartbeating so the broker keeps it.
    const busy = kafka.consumer({ groupId, sessionTimeout: 60_000, rebalanceTimeout: 60_000, heartbeatInterval: 1000, maxWaitTimeInMs: 100 });
    consumers.push(busy);
    const held = new Promise<void>((r) => (release = r));
    let inBatch = false;
    let mine: number[] = [];
    busy.on(busy.events.GROUP_JOIN, (e) => { mine = e.payload.memberAssignment[WEBHOOK_UPDATES_TOPIC] ?? []; });
    await busy.connect();
    await busy.subscribe({ topic: WEBHOOK_UPDATES_TOPIC, fromBeginning: false });
    await busy.run({
      eachBatch: async ({ heartbeat }) => {
        inBatch = true;
        let done = false;
        void held.then(() => (done = true));
        while (!done) {
          await heartbeat().catch(() => {}); // "rebalancing" once the third member comes: kept, not joined
          await sleep(500);
        }
      },
    });
    // Its join takes the service's member in (8 partitions between the two).
    await until(async () => mine, (p) => p.length > 0, 20_000);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.length).toBeLessThan(8);
    // A message on each partition: the busy member's hold it in its batch; the service's
    // member handles its own, so its close has offsets to commit (a commit waits for a
    // rebalance as a leave does).
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic: WEBHOOK_UPDATES_TOPIC, messages: Array.from({ length: 8 }, (_, partition) => ({ partition, key: 'nobody', value: '' })) });
    await producer.disconnect();
    await until(async () => inBatch, (b) => b, 20_000);
    expect(inBatch).toBe(true);
    // The partitions the service's member has handled a batch of (its lag gauge's series).
    const lagSeries = `botplatform_kafka_consumer_lag{group="${DISPATCHER_GROUP}",topic="${WEBHOOK_UPDATES_TOPIC}",partition="`;
    const handledByService = async () => (await h!.apps[0]!.telemetry.render()).body.split('\n')
      .filter((line) => line.startsWith(lagSeries)).map((line) => Number.parseInt(line.slice(lagSeries.length), 10));
    const handled = await until(handledByService, (partitions) => partitions.length > 0, 20_000);
    expect(mine).not.toContain(handled[0]);

    // A third member starts a rebalance: the service's member joins again and waits for the busy one.
    const third = kafka.consumer({ groupId, maxWaitTimeInMs: 100 });
    consumers.push(third);
    await third.connect();
    await third.subscribe({ topic: WEBHOOK_UPDATES_TOPIC, fromBeginning: false });
    // Not awaited: run() returns once its join ends, and that join waits for the busy member too.
    void third.run({ eachBatch: async () => {} });
    await sleep(4000); // the service's member has heard of the rebalance (its heartbeat is each second)

    const t0 = Date.now();
    await h.close();
    const closeMs = Date.now() - t0;
    h = undefined;
    // The rest of the close takes well under a second here; 60 s if the bus waited.
    expect(closeMs).toBeLessThan(10_000);
    expect(closeMs).toBeGreaterThanOrEqual(1500);
  }, 90_000);
});
