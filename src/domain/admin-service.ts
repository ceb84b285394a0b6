/** The review desk: admins list, approve and reject applications of every account. */
import { ApiError, Code } from '../errors.js';
import { ReviewStatus } from '../gen/botplatform/v1/bot.js';
import { constraintsOf } from '../gen/constraints.js';
import type { BotsRepo, ReviewStatusValue } from '../storage/bots-repo.js';
import type { SecretBox } from '../auth/secret-box.js';
import { REVIEW_STATUS, toBotMessage } from './bot-view.js';
import { issueToken } from './console-service.js';
import { botNotFound } from './own-bot.js';
import { paged } from './pagination.js';
import type { AdminRpc } from './rpc.js';
import * as check from './validation.js';

export interface AdminDeps {
  bots: BotsRepo;
  secretBox: SecretBox;
  oneTimeTokenRetentionMs: number;
  now?: () => number;
}

/** The limits of the admin requests, declared in the protos. */
const LIMITS = {
  list: {
    page: constraintsOf('botplatform.v1.ListBotsRequest', 'page'),
    limit: constraintsOf('botplatform.v1.ListBotsRequest', 'limit'),
  },
  reason: constraintsOf('botplatform.v1.RejectBotRequest', 'reason'),
};

const notPending = (status: string) =>
  new ApiError(Code.FAILED_PRECONDITION, `bot is not pending review (review_status: ${status})`);

export function createAdminService(deps: AdminDeps): AdminRpc {
  const now = deps.now ?? Date.now;

  async function pendingBot(id: string) {
    const bot = id ? await deps.bots.findById(id) : undefined;
    if (!bot) throw botNotFound();
    if (bot.reviewStatus !== 'pending') throw notPending(bot.reviewStatus);
    return bot;
  }

  return {
    async listBots(req) {
      const { page, limit } = check.pageAndLimit(req.page, req.limit, LIMITS.list);
      let status: ReviewStatusValue | undefined;
      if (req.reviewStatus !== ReviewStatus.REVIEW_STATUS_UNSPECIFIED) {
        status = (Object.keys(REVIEW_STATUS) as ReviewStatusValue[]).find((k) => REVIEW_STATUS[k] === req.reviewStatus);
        if (!status) throw ApiError.invalid('review_status', 'INVALID_VALUE', 'must be pending, approved or rejected');
      }
      return paged({ page, limit }, await deps.bots.listAll(status, page, limit), toBotMessage);
    },

    async approveBot(req) {
      const bot = await pendingBot(req.id);
      const at = now();
      const { issued } = issueToken(deps, at, true);
      if (!(await deps.bots.approve(bot.id, issued, at))) {
        throw notPending((await deps.bots.findById(bot.id))?.reviewStatus ?? 'unknown');
      }
      return { bot: toBotMessage((await deps.bots.findById(bot.id))!) };
    },

    async rejectBot(req) {
      const v = new check.Violations();
      check.requiredText(v, 'reason', req.reason, LIMITS.reason);
      v.throwIfAny();
      const bot = await pendingBot(req.id);
      if (!(await deps.bots.reject(bot.id, req.reason, now()))) {
        throw notPending((await deps.bots.findById(bot.id))?.reviewStatus ?? 'unknown');
      }
      return { bot: toBotMessage((await deps.bots.findById(bot.id))!) };
    },
  };
}

export type AdminService = ReturnType<typeof createAdminService>;
