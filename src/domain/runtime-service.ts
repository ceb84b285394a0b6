/** The bot API, as seen by an authenticated bot. */
import { ApiError } from '../errors.js';
import type { GetMeResponse } from '../gen/botplatform/v1/runtime_service.js';
import type { BotPrincipal } from '../core/context.js';
import type { BotsRepo } from '../storage/bots-repo.js';

export interface RuntimeDeps {
  bots: BotsRepo;
}

export function createRuntimeService(deps: RuntimeDeps) {
  return {
    async getMe(principal: BotPrincipal): Promise<GetMeResponse> {
      const bot = await deps.bots.findById(principal.botId);
      if (!bot) throw ApiError.unauthenticated('invalid or revoked bot token');
      return {
        result: {
          id: bot.id,
          isBot: true,
          name: bot.name,
          username: bot.username,
          supportsInlineQueries: bot.supportsInlineQueries,
          canJoinGroups: bot.canJoinGroups,
        },
      };
    },
  };
}

export type RuntimeService = ReturnType<typeof createRuntimeService>;
