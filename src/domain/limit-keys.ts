/** Fixed windows and counter keys shared by the limits interceptor and the metrics read. */

export const DAY_MS = 86_400_000;

/** The fixed window of `windowMs` that `now` falls in (aligned to the epoch; a day is a UTC day). */
export function windowOf(now: number, windowMs: number) {
  const windowStart = Math.floor(now / windowMs) * windowMs;
  return { windowStart, windowEnd: windowStart + windowMs };
}

export const rateKey = (botId: string) => `rate:${botId}`;
export const chatKey = (botId: string, chat: string) => `chat:${botId}:${chat}`.slice(0, 160);
export const quotaKey = (botId: string) => `quota:${botId}`;
