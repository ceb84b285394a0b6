/** The embedded default's bus: delivery within this process, in publish order. */
import type { Bus, BusMessage } from './bus.js';

export function createMemoryBus(): Bus {
  const subscribers: { topics: Set<string>; handler: (m: BusMessage) => void }[] = [];
  const groups = new Map<string, { topics: Set<string>; handler: (keys: string[]) => void }>();
  return {
    async publish(messages) {
      for (const m of messages) {
        for (const s of subscribers) if (s.topics.has(m.topic)) s.handler(m);
        for (const g of groups.values()) if (g.topics.has(m.topic)) g.handler([m.key]);
      }
    },
    async subscribeAll(topics, handler) {
      subscribers.push({ topics: new Set(topics), handler });
    },
    async subscribeGroup(group, topics, handler) {
      // One process: the group has one member.
      groups.set(group, { topics: new Set(topics), handler });
    },
    async close() {
      subscribers.length = 0;
      groups.clear();
    },
  };
}
