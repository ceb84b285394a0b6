/**
 * Long-poll waiters of this process, one per bot. A waiter is woken by the bus
 * (an update for its bot was committed, on any instance) and ended by a newer
 * getUpdates for the same bot (on any instance: the newer generation wins) or by
 * a switch to webhook delivery.
 *
 * The same control topic carries credential changes (a bot's token regenerated, the
 * bot suspended or revoked): every instance drops what it kept of the bot's
 * principal (src/core/authenticate.ts) as soon as the signal arrives.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import { ApiError, Code } from '../errors.js';
import type { Bus, BusMessage } from '../bus/bus.js';
import { createGroupCommit } from '../group-commit.js';
import { createBurstTrim } from '../heap-trim.js';
import { CONTROL_TOPIC, UPDATES_TOPIC } from '../bus/topics.js';
import type { StoredUpdate } from '../storage/updates-repo.js';

/** The caller's going away, as the wait reads it (an AbortSignal, or the gateway's lighter CallSignal). */
interface Gone {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: { handleEvent(): void }, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: { handleEvent(): void }): void;
}

type Signal =
  | { type: 'poll'; botId: string; generation: number }
  | { type: 'mode'; botId: string; mode: 'webhook' | 'polling' }
  | { type: 'credentials'; botId: string };
export type ControlSignal = Signal & { origin: string };
/**
 * The poll signals of one publish in one control message (keyed by their origin): each
 * bot's newest generation, as [bot id, generation]. One message, not one per poll: a
 * Kafka message costs kafkajs about 16 KB of garbage to produce and consume, and every
 * process reads every control message (a burst of 10,000 polls was most of a core's
 * allocations). Mode and credential signals go one per message, as before.
 */
interface PollPack {
  origin: string;
  polls: [botId: string, generation: number][];
}

/** Most polls one control message carries (about 60 bytes each). */
const POLLS_PER_MESSAGE = 500;

/**
 * Most bots whose newest known poll generation is kept (about 120 bytes each): enough for
 * every bot polling across the instances of a large deployment; past it the oldest is
 * forgotten (a claim here then does not know to end that bot's poll elsewhere, which ends
 * at its own timeout).
 */
const POLLS_KNOWN = 100_000;

/**
 * The newest poll known of a bot: its generation, whether it is this process's, and
 * whether the instances were told of it (a signal went out, or it is another's: heard).
 */
interface KnownPoll {
  readonly generation: number;
  readonly here: boolean;
  told: boolean;
}

/** How many more polls held make a burst, and how long no new one must arrive before its garbage is collected. */
const BURST_POLLS = 1000;
const BURST_QUIET_MS = 1000;

export const superseded = () =>
  new ApiError(Code.ABORTED, 'terminated by other getUpdates request; make sure that only one bot instance is running');
export const webhookActive = () =>
  new ApiError(Code.FAILED_PRECONDITION, "can't use getUpdates while a webhook is active; use deleteWebhook first");

/**
 * Most characters of one commit's updates of a bot carried to its waiters (encodeArrived);
 * more, and the announcement says only that they arrived (the waiter reads them).
 */
const ARRIVED_MAX_CHARS = 16_384;

/**
 * One commit's stored updates of one bot, as they travel to its long polls (the value of its
 * updates-topic message, and the local wake-up): a JSON array of [update_id, update_seq,
 * kind, created_at, message], the message as the updates table stores it. Undefined when
 * too long to carry. Sent only once committed: the database has them, and stays the source
 * a waiter reads whenever these do not cover what it waits for.
 */
export function encodeArrived(updates: StoredUpdate[]): string | undefined {
  const text = JSON.stringify(updates.map((u) => [u.updateId, u.updateSeq, u.kind, u.createdAt, u.message]));
  return text.length <= ARRIVED_MAX_CHARS ? text : undefined;
}

/** Whether a value is encodeArrived's (NO_DELIVERY and the empty value of older cores are not). */
const isArrived = (value: string) => value.charCodeAt(0) === 0x5b; // '['

function decodeArrived(botId: string, text: string): StoredUpdate[] {
  return (JSON.parse(text) as [number, number, string, number, Record<string, unknown>][])
    .map(([updateId, updateSeq, kind, createdAt, message]) => ({ updateId, botId, updateSeq, kind, message, createdAt }));
}

/** What a wake-up carried: encodeArrived's text (over a bus), or the updates themselves (this process's commit). */
type Arrived = string | readonly StoredUpdate[];

/** Who a parked claim tells how its wait ended (Claim.park). */
export interface Parked {
  woken(dirty: boolean): void;
  failed(err: ApiError): void;
}

const clientGone = () => new ApiError(Code.CANCELLED, 'client went away');

/** A wait's timer: its time is up (resolves with what it has). */
const wakeClaim = (claim: { wake(): void }) => claim.wake();

export function createUpdateWaiters(bus: Bus, logger: Logger) {
  const origin = crypto.randomUUID();
  const waiters = new Map<string, Claim>();
  let lastGeneration = 0;
  let closed = false;
  const credentialListeners: ((botId: string) => void)[] = [];
  /**
   * After a burst of polls (bots reconnecting at once), a full collection once they stop
   * arriving: what their requests left in the heap goes back now (src/heap-trim.ts).
   */
  const trim = createBurstTrim({ burst: BURST_POLLS, quietMs: BURST_QUIET_MS, held: () => waiters.size });

  /** Hybrid clock: microseconds of wall time, strictly increasing within the process. */
  const nextGeneration = () => (lastGeneration = Math.max(lastGeneration + 1, Date.now() * 1000));

  /**
   * Each bot's newest poll known here (this process's claims, other instances' signals),
   * oldest first: the takeover's memory (see claim).
   */
  const known = new Map<string, KnownPoll>();
  function remember(botId: string, poll: KnownPoll) {
    known.delete(botId);
    if (known.size >= POLLS_KNOWN) known.delete(known.keys().next().value!);
    known.set(botId, poll);
  }

  /** Tells every instance of this process's poll (once): an older one of the bot ends there. */
  function tell(botId: string, poll: KnownPoll) {
    if (poll.told) return;
    poll.told = true;
    // Not awaited: the local takeover is done, other instances hear of it shortly.
    signal({ type: 'poll', botId, generation: poll.generation }).catch((err) => logger.warn({ err }, 'poll signal not published'));
  }

  /** A mode or credentials signal, raised here or heard from another instance. */
  function onSignal(s: ControlSignal) {
    if (s.type === 'credentials') {
      for (const listener of credentialListeners) listener(s.botId);
      return;
    }
    if (s.type === 'poll') return heard(s.botId, s.generation);
    if (s.type === 'mode' && s.mode === 'webhook') waiters.get(s.botId)?.end(webhookActive);
  }

  /**
   * Another instance told of its poll of generation `generation` for the bot: an older one
   * here ends; a newer one here that has not told yet (it answered without waiting, or has
   * not waited yet) tells now, so that the other's ends in turn.
   */
  function heard(botId: string, generation: number) {
    const w = waiters.get(botId);
    if (w && generation > w.generation) w.end(superseded);
    const newest = known.get(botId);
    if (newest && newest.generation > generation) {
      if (newest.here) tell(botId, newest);
    } else remember(botId, { generation, here: false, told: true });
  }

  /**
   * Something may have arrived for the bot: its waiter reads again (a duplicate costs one
   * read), or, with `arrived` (what arrived: encodeArrived's text from the bus, or this
   * process's commit's updates themselves), may answer from it.
   */
  function poke(botId: string, arrived?: Arrived) {
    const w = waiters.get(botId);
    if (w) {
      w.dirty = true;
      if (arrived === undefined) w.arrived = null;
      else if (w.arrived !== null) (w.arrived ??= []).push(arrived);
      w.wake();
    }
  }

  async function start() {
    await bus.subscribeAll([UPDATES_TOPIC, CONTROL_TOPIC], (m: BusMessage) => {
      if (m.topic === UPDATES_TOPIC) {
        poke(m.key, isArrived(m.value) ? m.value : undefined);
        return;
      }
      // This process's own poll packs (keyed by its origin) were applied as they were raised.
      if (m.key === origin) return;
      const signal = JSON.parse(m.value) as ControlSignal | PollPack;
      if (signal.origin === origin) return;
      if ('polls' in signal) {
        for (const [botId, generation] of signal.polls) heard(botId, generation);
      } else onSignal(signal);
    });
  }

  // Signals leave one publish at a time (a group commit): those raised in the same tick,
  // or while the previous publish is on its way, go together in the next. Of one bot's
  // poll signals in a publish only the newest goes, since it ends whatever an older one
  // would. A burst of polls (every client reconnecting at once, or one client's many
  // connections) costs one bus round trip and one message per POLLS_PER_MESSAGE bots
  // (a PollPack), not one each.
  const publishing = createGroupCommit<ControlSignal, void>(async (signals) => {
    /** Each bot's newest poll generation (a process's generations only grow). */
    const newestPoll = new Map<string, number>();
    const messages: BusMessage[] = [];
    for (const s of signals) {
      if (s.type === 'poll') newestPoll.set(s.botId, s.generation);
      else messages.push({ topic: CONTROL_TOPIC, key: s.botId, value: JSON.stringify(s) });
    }
    const polls = [...newestPoll];
    for (let at = 0; at < polls.length; at += POLLS_PER_MESSAGE) {
      const pack: PollPack = { origin, polls: polls.slice(at, at + POLLS_PER_MESSAGE) };
      messages.push({ topic: CONTROL_TOPIC, key: origin, value: JSON.stringify(pack) });
    }
    await bus.publish(messages);
    return signals.map(() => undefined);
  }, { gather: 'turn' });
  /** Raises a signal: applied here at once (a poll's takeover here is the claim's own), then published. */
  function signal(s: Signal): Promise<void> {
    const full = { ...s, origin } as ControlSignal;
    if (s.type !== 'poll') onSignal(full);
    return publishing.write([full]).then(() => undefined);
  }

  /**
   * One getUpdates call's hold on its bot's long poll, from its claim to its release:
   * what it waits on. A class, not closures per call: a waiting poll holds one object
   * (its methods are shared), its listener (the call's own record) and its timer.
   */
  class Claim {
    /** Set when something may have arrived since the last read. */
    dirty = false;
    /**
     * What arrived since the last read, as the pokes carried it (encodeArrived's texts, or
     * a local commit's updates); null when a poke did not say (a read is needed); undefined
     * when none did yet.
     */
    arrived: Arrived[] | null | undefined = undefined;
    /** Why the claim ended, if it did (made only if the caller still waits: a stack trace costs). */
    private ended: (() => ApiError) | null = null;
    /** While the call waits: who is told, its timer, and the caller's signal with this claim's listener on it. */
    private parked: Parked | null = null;
    private timer: NodeJS.Timeout | undefined = undefined;
    private signal: Gone | null = null;

    /**
     * @param known this claim as the takeover's memory holds it, when the instances are to
     *   hear of it (told when it first waits, or at once if a poll elsewhere is known)
     */
    constructor(readonly botId: string, readonly generation: number, private readonly known: KnownPoll | undefined) {}

    /** Ends the claim: its wait, now or when it begins, fails with `reason`. */
    end(reason: () => ApiError) {
      this.ended = reason;
      if (waiters.get(this.botId) === this) waiters.delete(this.botId);
      this.wake();
    }

    /** Settles the wait in progress, if any: failed if ended, else woken with `dirty`. */
    wake() {
      const parked = this.parked;
      if (!parked) return;
      clearTimeout(this.timer);
      this.signal?.removeEventListener('abort', this);
      this.parked = this.signal = null;
      this.timer = undefined;
      if (this.ended) parked.failed(this.ended());
      else parked.woken(this.dirty);
    }

    /** The caller went away (its signal's abort event, while the claim waits). */
    handleEvent() {
      this.end(clientGone);
    }

    /** Whether an update may have arrived since the last call; clears the flag. */
    takeDirty(): boolean {
      const d = this.dirty;
      this.dirty = false;
      this.arrived = undefined;
      return d;
    }

    /**
     * The updates from update_seq `from` on (at most `limit`), when every poke since the
     * last read carried what arrived and those hold `from` and what follows it with no gap:
     * what a read would answer now, or a prefix of it (a commit whose poke is still on its
     * way follows). Then the flag is cleared as by takeDirty. Otherwise undefined: read.
     */
    takeArrived(from: number, limit: number): StoredUpdate[] | undefined {
      const texts = this.arrived;
      if (!this.dirty || !texts) return undefined;
      const bySeq = new Map<number, StoredUpdate>();
      for (const carried of texts) {
        for (const u of typeof carried === 'string' ? decodeArrived(this.botId, carried) : carried) if (u.updateSeq >= from) bySeq.set(u.updateSeq, u);
      }
      const run: StoredUpdate[] = [];
      for (let seq = from; run.length < limit && bySeq.has(seq); seq++) run.push(bySeq.get(seq)!);
      if (run.length === 0) return undefined;
      this.dirty = false;
      this.arrived = undefined;
      return run;
    }

    /**
     * Waits until woken, `until` (epoch ms) or abort, then tells `parked` (at once if
     * there is nothing to wait for): woken(false) on timeout or shutdown, woken(true) when
     * something may have arrived; failed with 409 when ended by a newer poll or a webhook.
     */
    park(until: number, signal: Gone, parked: Parked): void {
      // The client may have left before the wait began: its abort event has already fired.
      if (signal.aborted && !this.ended) this.end(clientGone);
      if (this.ended) return parked.failed(this.ended());
      // Shutdown began while the call was reading (between its claim and this wait, or
      // between two waits): it answers now with what it has, as waiting polls did.
      if (closed) return parked.woken(false);
      if (this.dirty) return parked.woken(true);
      if (this.known) tell(this.botId, this.known);
      this.parked = parked;
      this.timer = setTimeout(wakeClaim, Math.max(0, until - Date.now()), this);
      this.signal = signal;
      // The claim itself listens (handleEvent), as EventTarget allows: no closure per waiting poll.
      signal.addEventListener('abort', this, { once: true });
    }

    /** park() as a promise: resolves false on timeout or shutdown, true when woken; rejects with 409 when ended. */
    wait(until: number, signal: Gone): Promise<boolean> {
      return new Promise<boolean>((resolve, reject) => this.park(until, signal, { woken: resolve, failed: reject }));
    }

    release() {
      if (waiters.get(this.botId) === this) waiters.delete(this.botId);
    }
  }

  return {
    start,

    /**
     * Registers the caller as the bot's current poller (ending any older one, here
     * or, with `signalOthers`, on another instance) and returns a handle to wait on.
     *
     * The other instances are told of a claim only when it could meet an older poll
     * there: when it begins to wait (a poll that answers at once holds nothing another
     * must give up), at once when another instance's poll of the bot is the newest known
     * here, and when another instance tells of an older poll after this claim was made
     * (heard). A short poll (timeout 0, or updates already there) publishes nothing,
     * where each used to cost a control message to produce and for every instance to
     * consume.
     */
    claim(botId: string, signalOthers: boolean): Claim {
      if (closed) throw new ApiError(Code.UNAVAILABLE, 'shutting down');
      const generation = nextGeneration();
      let poll: KnownPoll | undefined;
      if (signalOthers) {
        const newest = known.get(botId);
        remember(botId, (poll = { generation, here: true, told: false }));
        if (newest && !newest.here) tell(botId, poll);
      }
      const claim = new Claim(botId, generation, poll);
      waiters.get(botId)?.end(superseded);
      waiters.set(botId, claim);
      trim.note(waiters.size);
      return claim;
    },

    /**
     * Tells every instance the bot changed delivery mode (ends its long polls on webhook).
     * Done here at once; other instances hear of it when the bus takes the signal (a bus
     * outage does not fail the call that changed the mode).
     */
    modeChanged(botId: string, mode: 'webhook' | 'polling') {
      return signal({ type: 'mode', botId, mode }).catch((err) => logger.warn({ err, botId }, 'mode signal not published'));
    },

    /**
     * The bot's credentials changed (committed): every instance forgets what it kept
     * of them — this one at once, the others when the bus delivers the signal. Resolves
     * once the bus has taken it, or after at most 2 s (a bus outage does not fail the
     * call that changed them: the failure is logged, the others' kept principals expire
     * by their TTL, and they keep none while their own bus is down).
     */
    credentialsChanged(botId: string): Promise<void> {
      const published = signal({ type: 'credentials', botId }).catch((err) => logger.warn({ err, botId }, 'credentials signal not published'));
      let timer: NodeJS.Timeout | undefined;
      const capped = new Promise<void>((resolve) => (timer = setTimeout(resolve, 2000)));
      return Promise.race([published, capped]).finally(() => clearTimeout(timer));
    },

    /** Calls `listener` with the bot id of every credential change, local or from another instance. */
    onCredentialsChanged(listener: (botId: string) => void) {
      credentialListeners.push(listener);
    },

    /**
     * Updates of these bots were committed by this process: their waiters here read again,
     * bus or no bus, or answer from what arrived (`arrived`: the commit's updates of the bot,
     * as stored; asked only of bots with a waiter here).
     */
    committed(botIds: Iterable<string>, arrived?: (botId: string) => readonly StoredUpdate[] | undefined) {
      for (const botId of botIds) if (waiters.has(botId)) poke(botId, arrived?.(botId));
    },

    /** Every waiter reads again (the bus may have missed updates committed by other instances). */
    recheckAll() {
      for (const botId of waiters.keys()) poke(botId);
    },

    /** How many long polls this process holds. */
    size: () => waiters.size,

    /**
     * Shutdown: every long poll answers now, with what it has (nothing); one that is
     * not waiting yet answers as soon as it would wait, and a new one is refused.
     */
    close() {
      closed = true;
      trim.close();
      for (const w of [...waiters.values()]) {
        w.dirty = false;
        w.wake();
      }
      waiters.clear();
    },
  };
}

export type UpdateWaiters = ReturnType<typeof createUpdateWaiters>;
/** One getUpdates call's hold on its bot's long poll (UpdateWaiters.claim). */
export type Claim = ReturnType<UpdateWaiters['claim']>;
