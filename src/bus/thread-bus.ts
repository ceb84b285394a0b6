/**
 * The in-process bus reaching across worker threads (the embedded default with
 * DISPATCHER_THREADS > 0): the main thread's hub wraps its memory bus, and each thread
 * gets a bus of its own over a MessagePort (`createPortBus`).
 *
 * - Fan-out (subscribeAll): every subscriber in every thread gets every message.
 * - Groups (subscribeGroup): a thread joins in a slot (its index among `slots`); a
 *   message's key goes to the slot `slotOf(key, slots)`, so one key (a bot) always
 *   reaches the same thread, as a Kafka partition keeps one key on one member. A slot
 *   with no member (its thread restarting) gets nothing meanwhile: a group's members
 *   must not depend on its messages (the dispatcher's sweep finds what is due).
 * - A thread's publish goes through the hub, like the main thread's own.
 *
 * Each publish costs one postMessage per thread that has anything of it (keys are
 * gathered per group), not one per message.
 */
import type { MessagePort } from 'node:worker_threads';
import type { Bus, BusMessage } from './bus.js';

/** The slot of `key` among `slots` (FNV-1a of its characters): the same in every thread. */
export function slotOf(key: string, slots: number): number {
  if (slots <= 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % slots;
}

/** What a thread's bus sends to the hub. */
type ToHub =
  | { t: 'publish'; messages: BusMessage[] }
  | { t: 'all'; topics: string[] }
  | { t: 'group'; group: string; topics: string[]; slot: number };

/** What the hub sends to a thread's bus. */
type ToThread = { t: 'deliver'; messages: BusMessage[]; groups: [group: string, keys: string[]][] };

interface Member {
  port: MessagePort;
  /** Topics it takes every message of. */
  all: Set<string>;
  /** Groups it is a member of: topics, and its slot. */
  groups: Map<string, { topics: Set<string>; slot: number }>;
}

export interface ThreadBusHub {
  /** The main thread's bus: what it publishes reaches its own subscribers and every thread's. */
  bus: Bus;
  /** Attaches a thread's port (the other end of the one given to createPortBus). */
  attach(port: MessagePort): void;
  /** Detaches it (its thread ended): its slots get nothing until another joins them. */
  detach(port: MessagePort): void;
}

/**
 * The hub over `local` (the main thread's memory bus). `slots`: how many members a group
 * is split among (the number of threads).
 */
export function createThreadBusHub(local: Bus, slots: number): ThreadBusHub {
  const members = new Map<MessagePort, Member>();
  /** Per group, the member in each slot. */
  const slotted = new Map<string, (Member | undefined)[]>();

  async function publish(messages: BusMessage[]) {
    await local.publish(messages);
    for (const m of members.values()) {
      const fanned = m.all.size === 0 ? [] : messages.filter((x) => m.all.has(x.topic));
      const groups: [string, string[]][] = [];
      for (const [group, g] of m.groups) {
        const keys = new Set<string>();
        for (const x of messages) if (g.topics.has(x.topic) && slotOf(x.key, slots) === g.slot) keys.add(x.key);
        if (keys.size > 0) groups.push([group, [...keys]]);
      }
      if (fanned.length > 0 || groups.length > 0) m.port.postMessage({ t: 'deliver', messages: fanned, groups } satisfies ToThread);
    }
  }

  return {
    bus: {
      publish,
      subscribeAll: (topics, handler) => local.subscribeAll(topics, handler),
      subscribeGroup: (group, topics, handler) => local.subscribeGroup(group, topics, handler),
      problem: () => local.problem?.(),
      async close() {
        for (const port of [...members.keys()]) detach(port);
        await local.close();
      },
    },
    attach(port) {
      const member: Member = { port, all: new Set(), groups: new Map() };
      members.set(port, member);
      port.on('message', (msg: ToHub) => {
        if (msg.t === 'publish') void publish(msg.messages);
        else if (msg.t === 'all') for (const t of msg.topics) member.all.add(t);
        else if (msg.t === 'group') {
          member.groups.set(msg.group, { topics: new Set(msg.topics), slot: msg.slot });
          const list = slotted.get(msg.group) ?? [];
          list[msg.slot] = member;
          slotted.set(msg.group, list);
        }
      });
    },
    detach,
  };

  function detach(port: MessagePort) {
    const member = members.get(port);
    if (!member) return;
    members.delete(port);
    for (const list of slotted.values()) {
      for (let i = 0; i < list.length; i++) if (list[i] === member) list[i] = undefined;
    }
    port.removeAllListeners('message');
    port.close();
  }
}

/**
 * A thread's bus over `port` (attached to the hub in the main thread). Its group
 * subscriptions take slot `slot`: the keys with slotOf(key) === slot.
 */
export function createPortBus(port: MessagePort, slot: number): Bus {
  const all: { topics: Set<string>; handler: (m: BusMessage) => void }[] = [];
  const groups = new Map<string, (keys: string[]) => void>();
  const send = (msg: ToHub) => port.postMessage(msg);
  port.on('message', (msg: ToThread) => {
    for (const m of msg.messages) for (const s of all) if (s.topics.has(m.topic)) s.handler(m);
    for (const [group, keys] of msg.groups) groups.get(group)?.(keys);
  });
  return {
    async publish(messages) {
      send({ t: 'publish', messages });
    },
    async subscribeAll(topics, handler) {
      all.push({ topics: new Set(topics), handler });
      send({ t: 'all', topics });
    },
    async subscribeGroup(group, topics, handler) {
      groups.set(group, handler);
      send({ t: 'group', group, topics, slot });
    },
    async close() {
      all.length = 0;
      groups.clear();
      port.removeAllListeners('message');
      port.close();
    },
  };
}
