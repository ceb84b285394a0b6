/**
 * The limits interceptor: a bot's request rate, its send rate per chat, and its
 * daily quota, counted in fixed windows in the database (shared by every core
 * instance, kept across restarts). Calls deciding at the same time share one
 * transaction (group commit, started after the current event-loop turn so that
 * calls arriving together share it). A refused call takes nothing from any counter and
 * answers RESOURCE_EXHAUSTED with the seconds until the window that refused it
 * ends; once a counter is full, this instance refuses it without asking the
 * database again until its window ends.
 */
import type { Logger } from 'pino';
import type { RateSetting } from '../config.js';
import { ApiError, Code } from '../errors.js';
import { methodSettings } from '../gen/methods.js';
import { createGroupCommit } from '../group-commit.js';
import type { AdmitResult, CounterRule, LimitsRepo } from '../storage/limits-repo.js';
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

export function createLimiter(deps: { repo: LimitsRepo; settings: LimitSettings; telemetry: Telemetry; logger: Logger; now?: () => number }) {
  const now = deps.now ?? Date.now;
  const { botRate, chatRate, dailyQuota } = deps.settings;
  /** Counters known full, until their window ends. */
  const full = new Map<string, number>();

  const commit = createGroupCommit<CounterRule[], AdmitResult>((calls) => deps.repo.admit(calls), 500, undefined, true);

  function rulesOf(botId: string, path: string, request: unknown, at: number): CounterRule[] {
    const rules: CounterRule[] = [];
    if (botRate) rules.push({ key: rateKey(botId), limit: botRate.count, ...windowOf(at, botRate.windowMs) });
    const chat = chatRate ? chatOf(path, request) : undefined;
    if (chat !== undefined && chatRate) rules.push({ key: chatKey(botId, chat), limit: chatRate.count, ...windowOf(at, chatRate.windowMs) });
    if (dailyQuota > 0) rules.push({ key: quotaKey(botId), limit: dailyQuota, ...windowOf(at, DAY_MS) });
    return rules;
  }

  function refuse(rule: CounterRule, at: number): ApiError {
    if (full.size > 100_000) full.clear();
    full.set(rule.key, rule.windowEnd);
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

  return {
    /** Admits one runtime call of `botId` or throws RESOURCE_EXHAUSTED with a retry delay. */
    async check(botId: string, path: string, request: unknown): Promise<void> {
      const at = now();
      const rules = rulesOf(botId, path, request, at);
      if (rules.length === 0) return;
      for (const r of rules) {
        const until = full.get(r.key);
        if (until !== undefined) {
          if (until > at && until === r.windowEnd) throw refuse(r, at);
          full.delete(r.key);
        }
      }
      let result: AdmitResult;
      try {
        [result] = (await commit.write([rules])) as [AdmitResult];
      } catch (err) {
        // A counter store outage does not become a service outage: the call goes through.
        deps.logger.warn({ err }, 'rate limiter unavailable; call admitted unchecked');
        return;
      }
      if (!result.ok) throw refuse(result.rule, at);
    },
  };
}

export type Limiter = ReturnType<typeof createLimiter>;
