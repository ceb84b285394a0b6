/**
 * The update bus: Kafka at scale, an in-process emitter on the embedded default,
 * behind one interface. Messages are keyed (by bot id), so one key's messages stay
 * in order.
 */

export interface BusMessage {
  topic: string;
  key: string;
  value: string;
}

export interface Bus {
  /** Resolves once the bus has taken the messages (Kafka: acknowledged by the broker). */
  publish(messages: BusMessage[]): Promise<void>;
  /**
   * Every subscriber in every process receives every message published from now
   * on (fan-out: long-poll waiters, control signals).
   */
  subscribeAll(topics: string[], handler: (message: BusMessage) => void): Promise<void>;
  /**
   * The group's members share the topics' messages (a Kafka consumer group): each
   * key's messages reach one member. The handler gets the keys of a batch.
   * Resolves once subscribed, possibly before the group is joined: a member must
   * not rely on the group's messages alone.
   */
  subscribeGroup(group: string, topics: string[], handler: (keys: string[]) => void): Promise<void>;
  /**
   * Why the bus is not delivering right now (e.g. the broker is unreachable), or
   * undefined. Subscribers may miss messages meanwhile and should read the database.
   */
  problem?(): string | undefined;
  close(): Promise<void>;
}

