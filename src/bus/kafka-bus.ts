/**
 * The bus on Kafka (kafkajs). Topics are created at start if missing. Fan-out
 * subscriptions use a consumer group of their own per process, starting at the
 * newest offset: each process sees every message published while it runs.
 */
import crypto from 'node:crypto';
import { Kafka, logLevel, type Consumer, type Producer } from 'kafkajs';
import type { Logger } from 'pino';
import type { Bus } from './bus.js';
// Stops kafkajs's 1 ms timer loop on every idle broker connection (see the module).
import './kafkajs-idle-fix.js';

/**
 * How long the broker holds a consumer's fetch while it has nothing for it: how often an
 * idle consumer asks again (once a second). A message is answered at once whatever the
 * wait (kafkajs's minBytes is 1); each empty answer costs kafkajs CPU and garbage (a
 * batch per partition, their lag, a heartbeat's check), which at 100 ms, with a process's
 * two consumers, was most of an idle core's CPU on MariaDB + Kafka (bench:idle, three
 * 30 s windows: 4.2% of a core at 100, 1.9% at 1000). Well under STALL_MS.
 */
const FETCH_WAIT_MS = 1000;

/** How often a consumer group's member commits the offsets it has handled (subscribeGroup). */
const GROUP_COMMIT_MS = 5000;

/**
 * How long a group's coordinator waits for its members to join again in a rebalance
 * (kafkajs's default is 60 s). Our members' handlers return at once (they kick; the work is
 * elsewhere), so a live member answers in about a fetch's wait. A consumer's disconnect
 * waits for a rebalance it is in: at 60 s, one member that did not answer held another's
 * shutdown for a minute.
 */
const REBALANCE_TIMEOUT_MS = 10_000;

export interface KafkaBusOptions {
  brokers: string[];
  clientId: string;
  topics: { topic: string; partitions: number }[];
  logger: Logger;
  /** Told, after each batch a consumer handles, how far behind the partition end it is. */
  onLag?: (group: string, topic: string, partition: number, lag: number) => void;
  /**
   * How long close() waits for its consumers to leave their groups (SHUTDOWN_TIMEOUT): then it
   * goes on without them, and the broker drops them when their sessions end (10 s).
   */
  closeTimeoutMs: number;
}

export async function createKafkaBus(opts: KafkaBusOptions): Promise<Bus> {
  const log = opts.logger.child({ component: 'kafka' });
  /** Set by close(): a consumer cut off mid-request by our own disconnect is expected, not news, and not restarted. */
  let closing = false;
  const kafka = new Kafka({
    clientId: opts.clientId,
    brokers: opts.brokers,
    logLevel: logLevel.WARN,
    logCreator: () => ({ level, log: entry }) => {
      const { message, ...extra } = entry;
      if (closing) log.debug(extra, message);
      else if (level <= logLevel.ERROR) log.error(extra, message);
      else log.warn(extra, message);
    },
    // Reconnects (after a broker outage) are tried at least every 2 s, not backed off to 30 s.
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 2000 },
  });

  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = opts.topics.filter((t) => !existing.has(t.topic));
    if (missing.length > 0) {
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((t) => ({ topic: t.topic, numPartitions: t.partitions })),
      });
    }
  } finally {
    await admin.disconnect();
  }

  // Not idempotent with one request in flight: that would queue every control signal
  // behind every outbox batch. The outbox relay awaits each batch (its own order);
  // consumers rely on ids in the messages, not on their arrival order.
  // Fails fast with the broker down (a few short retries, not the client's eight):
  // the relay backs off and tries again, and nothing waits on it meanwhile.
  const producer: Producer = kafka.producer({
    allowAutoTopicCreation: false,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  await producer.connect();
  const consumers: Consumer[] = [];
  /** Per group member: commits the offsets it handled since its last commit (at close). */
  const finalCommits = new Map<Consumer, () => Promise<void>>();
  /** When each fan-out consumer last completed a fetch (it fetches every few ms while the broker answers). */
  const lastFetch = new Map<Consumer, number>();
  const STALL_MS = 3000;

  /** Reports the consumer's lag per partition as each batch ends (kafkajs computes it from the high watermark). */
  const watchLag = (consumer: Consumer, group: string) => {
    if (!opts.onLag) return;
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      opts.onLag!(group, payload.topic, payload.partition, Number(payload.offsetLag));
    });
  };

  return {
    async publish(messages) {
      const byTopic = new Map<string, { key: string; value: string }[]>();
      for (const m of messages) {
        if (!byTopic.has(m.topic)) byTopic.set(m.topic, []);
        byTopic.get(m.topic)!.push({ key: m.key, value: m.value });
      }
      await producer.sendBatch({ acks: -1, topicMessages: [...byTopic].map(([topic, msgs]) => ({ topic, messages: msgs })) });
    },

    async subscribeAll(topics, handler) {
      const consumer = kafka.consumer({
        groupId: `${opts.clientId}-fanout-${crypto.randomUUID()}`,
        maxWaitTimeInMs: FETCH_WAIT_MS,
        // A group of one: its heartbeat only keeps its session (kafkajs's default, a third
        // of the session; it goes between fetches, as their answers come).
        sessionTimeout: 10_000,
        heartbeatInterval: 3000,
        rebalanceTimeout: 10_000,
      });
      await consumer.connect();
      watchLag(consumer, 'fanout');
      lastFetch.set(consumer, Date.now());
      consumer.on(consumer.events.FETCH, () => lastFetch.set(consumer, Date.now()));
      for (const topic of topics) await consumer.subscribe({ topic, fromBeginning: false });
      let joined: () => void;
      const ready = new Promise<void>((r) => (joined = r));
      consumer.on(consumer.events.GROUP_JOIN, () => joined());
      await consumer.run({
        autoCommit: false,
        // By batch: a message costs the handler's call, not kafkajs's round of promises
        // for each (its call, its offset, a heartbeat's check: about 2 KB of garbage).
        eachBatch: async ({ batch }) => {
          const { topic } = batch;
          for (const message of batch.messages) handler({ topic, key: message.key?.toString() ?? '', value: message.value?.toString() ?? '' });
          // A turn of the event loop before kafkajs goes on to write its next fetch: what the
          // handlers started (a woken long poll's read: mysql2 hands out a pooled connection
          // on process.nextTick, after every promise job) is written first, not after it.
          await new Promise<void>((resolve) => setImmediate(resolve));
        },
      });
      consumers.push(consumer);
      // Messages published before the group has its partitions would be missed.
      await ready;
    },

    async subscribeGroup(group, topics, handler) {
      const consumer = kafka.consumer({
        groupId: `${opts.clientId}-${group}`, maxWaitTimeInMs: FETCH_WAIT_MS, heartbeatInterval: 1000, sessionTimeout: 10_000,
        rebalanceTimeout: REBALANCE_TIMEOUT_MS,
        retry: { retries: 5, restartOnFailure: async () => !closing },
      });
      await consumer.connect();
      watchLag(consumer, group);
      for (const topic of topics) await consumer.subscribe({ topic, fromBeginning: false });
      // Not awaited: run() returns once the group is joined, and a join waits (up to the
      // session timeout) for a member that died, a dispatcher killed -9, to be dropped.
      // The process serves meanwhile; members of a group must not depend on its messages
      // for correctness (the dispatcher's sweep finds what is due). kafkajs retries the
      // join and restarts a crashed consumer by itself.
      // On close, what was handled since the last commit is committed before leaving the group.
      const handled = new Map<string, { topic: string; partition: number; offset: string }>();
      finalCommits.set(consumer, () => (handled.size > 0 ? consumer.commitOffsets([...handled.values()]) : Promise.resolve()));
      // Partitions handled before a rebalance may be another member's now.
      consumer.on(consumer.events.GROUP_JOIN, () => handled.clear());
      consumer.run({
        // Offsets commit at most every GROUP_COMMIT_MS, as batches are handled, not after each
        // batch (an OffsetCommit request and its answer per update message, on a core that is
        // busy with the update's wake-up): a member taking over after a crash or a rebalance
        // may get up to that much again, which costs its handler a repeated kick. The database,
        // not the log, says what is due.
        autoCommit: false,
        autoCommitInterval: GROUP_COMMIT_MS,
        eachBatch: async ({ batch, commitOffsetsIfNecessary }) => {
          const keys = new Set<string>();
          for (const m of batch.messages) if (m.key) keys.add(m.key.toString());
          if (keys.size > 0) handler([...keys]);
          handled.set(`${batch.topic}\n${batch.partition}`, { topic: batch.topic, partition: batch.partition, offset: String(BigInt(batch.lastOffset()) + 1n) });
          await commitOffsetsIfNecessary();
        },
      }).catch((err) => log.error({ err, group }, 'consumer group stopped'));
      consumers.push(consumer);
    },

    problem() {
      const now = Date.now();
      const stalled = Math.max(0, ...[...lastFetch.values()].map((at) => now - at));
      return stalled > STALL_MS ? `kafka: no fetch from the broker for ${Math.round(stalled / 1000)} s` : undefined;
    },

    async close() {
      closing = true;
      // A commit and a consumer's leaving both wait for the rebalance it is in (up to the
      // longest rebalance timeout a member asked for, and a broker that does not answer holds
      // them longer): bounded together, so the shutdown goes on.
      const leave = async () => {
        await Promise.allSettled([...finalCommits.values()].map((commit) => commit()));
        await Promise.allSettled(consumers.map((c) => c.disconnect()));
        return true;
      };
      let timer: NodeJS.Timeout | undefined;
      const left = await Promise.race([
        leave(),
        new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), opts.closeTimeoutMs))),
      ]);
      clearTimeout(timer);
      if (!left) log.warn({ waitedMs: opts.closeTimeoutMs }, 'a Kafka consumer did not leave its group in time; closing without it (the broker drops it when its session ends)');
      await producer.disconnect();
    },
  };
}
