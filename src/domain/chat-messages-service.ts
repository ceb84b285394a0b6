/**
 * The console's view of a bot's chats: the messages the bot sent to one of them, as
 * they are now (an edit shows its new text and keyboard; a deleted message is gone),
 * so the owner's test tool can show the bot's replies and press their buttons.
 */
import { constraintsOf } from '../gen/constraints.js';
import type { MessagesRepo } from '../storage/messages-repo.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import { fromWireMessage, type Wire } from '../wire.js';
import type { Message } from '../gen/botplatform/v1/update.js';
import { createOwnBots } from './own-bot.js';
import { paged } from './pagination.js';
import type { ConsoleRpc } from './rpc.js';
import * as check from './validation.js';

const LIMITS = {
  page: constraintsOf('botplatform.v1.ListChatMessagesRequest', 'page'),
  limit: constraintsOf('botplatform.v1.ListChatMessagesRequest', 'limit'),
};

export interface ChatMessagesDeps {
  bots: Pick<BotsRepo, 'findForOwner'>;
  messages: Pick<MessagesRepo, 'listSent'>;
}

export function createChatMessagesService(deps: ChatMessagesDeps): Pick<ConsoleRpc, 'listChatMessages'> {
  const own = createOwnBots(deps.bots);
  return {
    /** One page of the bot's messages in the chat, newest first; a chat it never wrote to has none. */
    async listChatMessages(req, { principal }) {
      const { page, limit } = check.pageAndLimit(req.page, req.limit, LIMITS);
      if (req.chatId === 0) {
        const v = new check.Violations();
        v.add('chat_id', 'INVALID_VALUE', 'must not be 0');
        v.throwIfAny();
      }
      const { id: botId } = await own.find(principal.accountId, req.id);
      const found = await deps.messages.listSent(botId, req.chatId, page, limit);
      return paged({ page, limit }, found, (m) => fromWireMessage(m as Wire<Message>));
    },
  };
}

export type ChatMessagesService = ReturnType<typeof createChatMessagesService>;
