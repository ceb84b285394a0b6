/**
 * The limits interceptor: a bot's request rate, its send rate per chat, and its
 * daily quota, counted in fixed windows in the database (shared by every core
 * instance, kept across restarts). Calls deciding at the same time share one
 * transaction (group commit, started after the current event-loop turn so that
 * calls arriving together share it). A refused call takes nothing from any counter and
 * answers RESOURCE_EXHAUSTED with the seconds until the window that refused it
 * ends; once a counter is full, this instance refuses it without asking the
 * database again until its window ends, or for at most `recheckFullMs` (what other
 * instances held in reserve comes back within it).
 *
 * A busy counter is decided in memory: with its calls, a transaction reserves on each
 * counter about `reserveAheadMs` (STATS_FLUSH_INTERVAL: until the next give-back) of this
 * instance's recent demand more, at most an
 * eighth of its limit (an allowance, counted in the database at once), and later calls
 * spend the allowance without asking the database. So no counter ever goes past its limit, however many instances share
 * it. A counter reserves nothing on its first decision in a window, nor when a call of
 * the batch does not fit in it, nor near its limit (less than twice the reservation
 * left): there every call is decided in the database, exactly. What an instance
 * reserved and did not use goes back to the counters every STATS_FLUSH_INTERVAL,
 * before a bot's quota is read on this instance, and on shutdown. Until then another
 * instance can be refused up to that many admissions early, and the quota reads that
 * many more used (a crashed instance's stay reserved until their window ends).
 */
import type { Logger } from 'pino';
import type { RateSetting } from '../config.js';
import { ApiError, Code } from '../errors.js';
import { methodSettings } from '../gen/methods.js';
import { createGroupCommit } from '../group-commit.js';
import type { AdmitResult, CounterRule, LimitsRepo, Reservation } from '../storage/limits-repo.js';
import type { Telemetry } from '../telemetry/metrics.js';
import { chatKey, DAY_MS, quotaKey, rateKey, windowOf } from '../domain/limit-keys.js';

export interface LimitSettings {
  botRate: RateSetting | null;
  chatRate: RateSetting | null;
  /** Runtime calls per bot per UTC day; 0: no quota. */
  dailyQuota: number;
}

/** The RPC method name of a path: "/botplatform.v1.RuntimeService/SendMessage" → "SendMessage". */
export const methodNameOf = (path: string) => path.slice(path.lastIndexOf('/') + 1);

/**
 * The chat a call sends to, for the per-chat limit: the chat_id of a method the
 * proto declares (botplatform.v1.chat_limited).
 */
function chatOf(path: string, request: unknown): string | undefined {
  if (!methodSettings[path]?.chatLimited || typeof request !== 'object' || request === null) return undefined;
  // Requests reach the core as generated message objects: chat_id is `chatId`.
  const chat = (request as { chatId?: unknown }).chatId;
  return chat === undefined || chat === null || chat === '' || chat === 0 ? undefined : String(chat);
}

/** What admits a call at once. */
const ADMITTED: Promise<void> = Promise.resolve();

/** The shortest span a demand's rate is measured over (a burst in one millisecond is not a rate of thousands a second). */
const MIN_SPAN_MS = 10;
/**
 * At most this share of a counter's limit in one reservation: a burst of a few calls
 * must not hold much of a small limit (30 a second) away from the other instances.
 */
const MAX_RESERVED_SHARE = 1 / 8;

/** This instance's share of one counter's current window. */
interface Allowance {
  botId: string;
  rule: CounterRule;
  /** Admissions reserved in the database and not yet spent. */
  left: number;
  /** Admissions spent from the allowance since `since`. */
  used: number;
  /** When the database last decided for this counter. */
  since: number;
}

export function createLimiter(deps: {
  repo: LimitsRepo; settings: LimitSettings; telemetry: Telemetry; logger: Logger; now?: () => number;
  /** How long a counter found full is refused here without asking the database again, within its window (STATS_FLUSH_INTERVAL). */
  recheckFullMs?: number;
  /**
   * How much of a counter's recent demand a transaction reserves ahead: its rate over this
   * long (STATS_FLUSH_INTERVAL: what is reserved and unused goes back that often). At 100 ms
   * a busy bot's counters went to the database ten times a second, and its calls cost 8% more
   * CPU (getMe and getWebhookInfo at 1 s against 100 ms, side by side, docs/benchmarks/results.md).
   */
  reserveAheadMs?: number;
}) {
  const now = deps.now ?? Date.now;
  const recheckFullMs = deps.recheckFullMs ?? 1000;
  const reserveAheadMs = deps.reserveAheadMs ?? 1000;
  const { botRate, chatRate, dailyQuota } = deps.settings;
  /**
   * Counters known full: when to ask the database again (at most recheckFullMs on, never
   * past the window's end, so a time still ahead means the same window).
   */
  const full = new Map<string, number>();
  /** Allowances by counter key. */
  const allowances = new Map<string, Allowance>();

  /** A batch's calls, and what it reserves on their busy counters; the grants become allowances. */
  async function decideBatch(items: { botId: string; rules: CounterRule[] }[]): Promise<AdmitResult[]> {
    const at = now();
    const calls = items.map((i) => i.rules);
    /** Each counter of the batch: its bot, its rule and how many of the batch's calls need it. */
    const counters = new Map<string, { botId: string; rule: CounterRule; calls: number }>();
    for (const { botId, rules } of items) {
      for (const rule of rules) {
        const c = counters.get(rule.key);
        if (c) c.calls++;
        else counters.set(rule.key, { botId, rule, calls: 1 });
      }
    }
    const reservations: Reservation[] = [];
    for (const [key, { rule, calls: n }] of counters) {
      const a = allowances.get(key);
      // A counter this instance decided before in this window: its demand since then, as a rate, over reserveAheadMs.
      if (!a || a.rule.windowStart !== rule.windowStart) continue;
      const ahead = Math.min(
        Math.floor(((a.used + n) * reserveAheadMs) / Math.max(MIN_SPAN_MS, at - a.since)),
        Math.floor(rule.limit * MAX_RESERVED_SHARE),
      );
      if (ahead > 0) reservations.push({ rule, n: ahead });
    }
    const { results, granted } = await deps.repo.admitReserving(calls, reservations);
    const after = now();
    for (const [key, { botId, rule }] of counters) {
      let a = allowances.get(key);
      if (!a || a.rule.windowStart !== rule.windowStart) {
        if (allowances.size > 100_000) void release().catch((err) => deps.logger.warn({ err }, 'limiter: giving back allowances failed'));
        a = { botId, rule, left: 0, used: 0, since: after };
        allowances.set(key, a);
      }
      a.used = 0;
      a.since = after;
      a.left += granted.get(key) ?? 0;
    }
    return results;
  }

  /** Resolves after this turn of the event loop (one promise for all the calls of the turn). */
  let turn: Promise<void> | null = null;
  const turnEnd = () => (turn ??= new Promise<void>((resolve) => setImmediate(() => {
    turn = null;
    resolve();
  })));
  const commit = createGroupCommit<{ botId: string; rules: CounterRule[] }, AdmitResult>(decideBatch, { gather: 'turn' });

  /** Gives back what was reserved and not used (of one bot's counters, or of all). */
  async function release(botId?: string): Promise<void> {
    const at = now();
    const items: { key: string; windowStart: number; n: number }[] = [];
    for (const [key, a] of allowances) {
      if (botId !== undefined && a.botId !== botId) continue;
      allowances.delete(key);
      if (a.left > 0 && a.rule.windowEnd > at) items.push({ key, windowStart: a.rule.windowStart, n: a.left });
    }
    if (items.length > 0) await deps.repo.release(items);
  }

  /**
   * A bot's rate and quota rules, made once per window and kept until the first of them
   * ends (a busy bot's calls share them: no keys, windows and rules made per call).
   */
  const botRules = new Map<string, { rules: CounterRule[]; since: number; until: number }>();
  function rulesOfBot(botId: string, at: number): CounterRule[] {
    const kept = botRules.get(botId);
    if (kept && at >= kept.since && at < kept.until) return kept.rules;
    const rules: CounterRule[] = [];
    if (botRate) rules.push({ key: rateKey(botId), limit: botRate.count, ...windowOf(at, botRate.windowMs) });
    if (dailyQuota > 0) rules.push({ key: quotaKey(botId), limit: dailyQuota, ...windowOf(at, DAY_MS) });
    if (rules.length > 0) {
      if (botRules.size >= 10_000) botRules.clear();
      botRules.set(botId, { rules, since: Math.max(...rules.map((r) => r.windowStart)), until: Math.min(...rules.map((r) => r.windowEnd)) });
    }
    return rules;
  }

  function rulesOf(botId: string, path: string, request: unknown, at: number): CounterRule[] {
    const chat = chatRate ? chatOf(path, request) : undefined;
    if (chat === undefined || !chatRate) return rulesOfBot(botId, at);
    // In the order the rules were always given: rate, chat, quota.
    const rules: CounterRule[] = [];
    if (botRate) rules.push({ key: rateKey(botId), limit: botRate.count, ...windowOf(at, botRate.windowMs) });
    rules.push({ key: chatKey(botId, chat), limit: chatRate.count, ...windowOf(at, chatRate.windowMs) });
    if (dailyQuota > 0) rules.push({ key: quotaKey(botId), limit: dailyQuota, ...windowOf(at, DAY_MS) });
    return rules;
  }

  function refuse(rule: CounterRule, at: number): ApiError {
    if (full.size > 100_000) full.clear();
    full.set(rule.key, Math.min(rule.windowEnd, at + recheckFullMs));
    const name: 'rate' | 'chat' | 'quota' = rule.key.startsWith('quota:') ? 'quota' : rule.key.startsWith('chat:') ? 'chat' : 'rate';
    deps.telemetry.limited(name);
    const retryAfterSeconds = Math.max(1, Math.ceil((rule.windowEnd - at) / 1000));
    const message = name === 'quota'
      ? `daily quota of ${rule.limit} calls used up; it resets at ${new Date(rule.windowEnd).toISOString()}`
      : name === 'chat'
        ? `too many messages to this chat: at most ${rule.limit} per ${(chatRate!.windowMs / 1000)}s`
        : `too many requests: at most ${rule.limit} per ${(botRate!.windowMs / 1000)}s`;
    return new ApiError(Code.RESOURCE_EXHAUSTED, message, { retryAfterSeconds });
  }

  /** A call some of whose counters the database decides (`spent`: what it took of allowances). */
  async function decideInDatabase(botId: string, rest: CounterRule[], spent: Allowance[], at: number): Promise<void> {
    let result: AdmitResult;
    try {
      [result] = (await commit.write([{ botId, rules: rest }])) as [AdmitResult];
    } catch (err) {
      // A counter store outage does not become a service outage: the call goes through.
      deps.logger.warn({ err }, 'rate limiter unavailable; call admitted unchecked');
      return;
    }
    if (!result.ok) {
      // A refused call takes nothing: what it spent of allowances is theirs again, or
      // (an allowance given back meanwhile) the counter's.
      const back: { key: string; windowStart: number; n: number }[] = [];
      for (const a of spent) {
        if (allowances.get(a.rule.key) === a) {
          a.left++;
          a.used--;
        } else back.push({ key: a.rule.key, windowStart: a.rule.windowStart, n: 1 });
      }
      if (back.length > 0) await deps.repo.release(back).catch((err) => deps.logger.warn({ err }, 'limiter: giving back an admission failed'));
      throw refuse(result.rule, at);
    }
  }

  return {
    /**
     * Admits one runtime call of `botId`, or rejects with RESOURCE_EXHAUSTED and a retry
     * delay. Not an async function: a call decided here (the busy case) gets the turn's
     * one promise itself, with no frame or promise of its own.
     */
    check(botId: string, path: string, request: unknown): Promise<void> {
      const at = now();
      const rules = rulesOf(botId, path, request, at);
      if (rules.length === 0) return ADMITTED;
      for (const r of rules) {
        const recheckAt = full.get(r.key);
        if (recheckAt !== undefined) {
          if (recheckAt > at) return Promise.reject(refuse(r, at));
          full.delete(r.key);
        }
      }
      // Counters with an allowance in this window are decided here; the database decides the others.
      let spent: Allowance[] | undefined;
      let rest: CounterRule[] | undefined;
      for (const r of rules) {
        const a = allowances.get(r.key);
        if (a && a.left > 0 && a.rule.windowStart === r.windowStart) {
          a.left--;
          a.used++;
          (spent ??= []).push(a);
        } else (rest ??= []).push(r);
      }
      // Decided here. The call goes on with the others of this turn of the event loop, as it
      // would from a batch: the reads after it are grouped per turn, and together they cost
      // less. A send goes on at once: its write waits for the turn's end anyway (the send
      // writer's group commit), and a turn more measurably costs it.
      if (rest === undefined) return methodSettings[path]?.chatLimited ? ADMITTED : turnEnd();
      return decideInDatabase(botId, rest, spent ?? [], at);
    },

    /** Gives back what was reserved ahead and not used, on every counter (every STATS_FLUSH_INTERVAL, and on shutdown). */
    release: () => release(),

    /** The same for one bot's counters (before its quota is read). */
    releaseBot: (botId: string) => release(botId),
  };
}

export type Limiter = ReturnType<typeof createLimiter>;
