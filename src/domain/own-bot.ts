/**
 * The caller's own bot, resolved one way for every method that names one (svix
 * `AuthenticatedOrganizationWithApplication`, server/svix-server/src/core/security.rs):
 * looked up with the owner's id first, so another account's bot is indistinguishable
 * from none (NOT_FOUND), and, where the method needs it, approved (FAILED_PRECONDITION
 * naming the review status). One message for each refusal.
 */
import { ApiError } from '../errors.js';
import type { BotRecord, BotsRepo } from '../storage/bots-repo.js';

/** What a bot refused as not yet approved is told; an ingest names the field before it. */
export const NOT_APPROVED = 'bot is not approved';

/** NOT_FOUND: no bot of this owner has the id (whether or not another owner's has). */
export const botNotFound = () => ApiError.notFound('bot');

/** FAILED_PRECONDITION: the bot has not passed review (`status`: its review status, when known). */
export const notApproved = (status: string | undefined) =>
  ApiError.failedPrecondition(`${NOT_APPROVED} (review_status: ${status ?? 'unknown'})`);

export interface OwnBots {
  /** The owner's bot `id`, or NOT_FOUND. */
  find(ownerId: string, id: string): Promise<BotRecord>;
  /** The owner's bot `id` if it is approved; else NOT_FOUND, or FAILED_PRECONDITION. */
  approved(ownerId: string, id: string): Promise<BotRecord>;
  /**
   * What a write that only an approved bot takes answers when it found none (the bot
   * changed since it was read): the bot read again, NOT_FOUND or FAILED_PRECONDITION.
   */
  refusal(ownerId: string, id: string): Promise<ApiError>;
}

export function createOwnBots(bots: Pick<BotsRepo, 'findForOwner'>): OwnBots {
  async function find(ownerId: string, id: string): Promise<BotRecord> {
    const bot = id ? await bots.findForOwner(ownerId, id) : undefined;
    if (!bot) throw botNotFound();
    return bot;
  }
  return {
    find,
    async approved(ownerId, id) {
      const bot = await find(ownerId, id);
      if (bot.reviewStatus !== 'approved') throw notApproved(bot.reviewStatus);
      return bot;
    },
    async refusal(ownerId, id) {
      const bot = await bots.findForOwner(ownerId, id);
      return bot ? notApproved(bot.reviewStatus) : botNotFound();
    },
  };
}
