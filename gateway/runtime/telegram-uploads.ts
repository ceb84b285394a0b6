/**
 * How many multipart uploads the Telegram surface reads at once: at most `perBot` for
 * one bot and `total` in all (UPLOADS_PER_BOT, UPLOADS_MAX). A slot is taken after the
 * token is checked and before a byte of the body is read, and given back when the
 * request is answered or abandoned; past either cap the request is refused at once
 * (429, retry after a second), its body unread.
 */
import { ApiError, Code } from '../../src/errors.js';

export interface UploadSlots {
  /** Takes a slot of `botId`'s, or throws RESOURCE_EXHAUSTED; answers the slot's release (idempotent). */
  take(botId: string): () => void;
  /** Slots held now, in all. */
  readonly inUse: number;
}

export function createUploadSlots(caps: { perBot: number; total: number }): UploadSlots {
  const byBot = new Map<string, number>();
  let inUse = 0;
  return {
    take(botId) {
      const mine = byBot.get(botId) ?? 0;
      if (mine >= caps.perBot) {
        throw new ApiError(Code.RESOURCE_EXHAUSTED, `too many uploads at once: this bot has ${caps.perBot} under way; retry when one ends`, { retryAfterSeconds: 1, reason: 'UPLOADS_PER_BOT' });
      }
      if (inUse >= caps.total) {
        throw new ApiError(Code.RESOURCE_EXHAUSTED, 'too many uploads at once on this server; retry shortly', { retryAfterSeconds: 1, reason: 'UPLOADS_MAX' });
      }
      byBot.set(botId, mine + 1);
      inUse++;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        inUse--;
        const n = byBot.get(botId)! - 1;
        if (n === 0) byBot.delete(botId);
        else byBot.set(botId, n);
      };
    },
    get inUse() {
      return inUse;
    },
  };
}
