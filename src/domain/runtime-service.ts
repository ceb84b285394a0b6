/** The bot API, as seen by an authenticated bot. */
import { ApiError } from '../errors.js';
import { constraintsOf } from '../gen/constraints.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import { checkCommands } from './console-service.js';
import { createOwnBots } from './own-bot.js';
import type { RuntimeRpc } from './rpc.js';
import * as check from './validation.js';

export interface RuntimeDeps {
  bots: BotsRepo;
  now?: () => number;
}

const COMMANDS = constraintsOf('botplatform.v1.SetMyCommandsRequest', 'commands');

export function createRuntimeService(deps: RuntimeDeps): Pick<RuntimeRpc, 'getMe' | 'setMyCommands' | 'getMyCommands' | 'deleteMyCommands'> {
  const now = deps.now ?? Date.now;
  const own = createOwnBots(deps.bots);

  async function botOf(botId: string) {
    const bot = await deps.bots.findById(botId);
    if (!bot) throw ApiError.unauthenticated('invalid or revoked bot token');
    return bot;
  }

  /** The command menu (the console's command_menu) replaced; only while the bot is approved. */
  async function setMenu(principal: { ownerId: string; botId: string }, menu: { command: string; description: string }[]) {
    const ok = await deps.bots.updateProfile(principal.ownerId, principal.botId, { commandMenu: menu }, now());
    if (!ok) throw await own.refusal(principal.ownerId, principal.botId);
  }

  return {
    async getMe(_req, { principal }) {
      // The auth step's read (or its kept principal, dropped on a profile change) answers, else the row.
      const bot = principal.profile ? { id: principal.botId, ...principal.profile } : await botOf(principal.botId);
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

    async setMyCommands(req, { principal }) {
      const v = new check.Violations();
      const menu = req.commands.map(({ command, description }) => ({ command, description }));
      checkCommands(v, menu, COMMANDS, 'commands');
      v.throwIfAny();
      await setMenu(principal, menu);
      return { result: true };
    },

    async getMyCommands(_req, { principal }) {
      const bot = await botOf(principal.botId);
      return { result: bot.commandMenu.map(({ command, description }) => ({ command, description })) };
    },

    async deleteMyCommands(_req, { principal }) {
      await setMenu(principal, []);
      return { result: true };
    },
  };
}

export type RuntimeService = ReturnType<typeof createRuntimeService>;
