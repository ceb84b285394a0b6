/** A listing's answer (ListMyBots, ListBots, ListDeliveries): one page of items and the one pagination envelope. */
import type { Pagination } from '../gen/botplatform/v1/bot.js';

/** The page of `found` asked for, its items as messages, and whether another page follows. */
export function paged<T, M>(
  { page, limit }: { page: number; limit: number },
  found: { items: T[]; total: number },
  toMessage: (item: T) => M,
): { items: M[]; pagination: Pagination } {
  const { items, total } = found;
  return { items: items.map((item) => toMessage(item)), pagination: { page, limit, total, hasMore: page * limit < total } };
}
