/** The bot API, as seen by an authenticated bot. */
import { ApiError } from '../errors.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import type { RuntimeRpc } from './rpc.js';

export interface RuntimeDeps {
  bots: BotsRepo;
}

export function createRuntimeService(deps: RuntimeDeps): Pick<RuntimeRpc, 'getMe'> {
  return {
    async getMe(_req, { principal }) {
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
