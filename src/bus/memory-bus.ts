/** The embedded default's bus: delivery within this process, in publish order. */
import type { Bus, BusMessage } from './bus.js';

export function createMemoryBus(): Bus {
  const subscribers: { topics: Set<string>; handler: (m: BusMessage) => void }[] = [];
  return {
    async publish(messages) {
      for (const m of messages) {
        for (const s of subscribers) if (s.topics.has(m.topic)) s.handler(m);
      }
    },
    async subscribeAll(topics, handler) {
      subscribers.push({ topics: new Set(topics), handler });
    },
    async close() {
      subscribers.length = 0;
    },
  };
}
