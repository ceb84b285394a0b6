/**
 * A bot's chats: what the platform knows of one (getChat: its type and the names its
 * latest message came with), and what the bot is doing in one (sendChatAction: an event
 * on the outbound feed for the messaging services to show, "typing…" for 5 seconds or
 * until the bot's next message; not stored as a message).
 */
import { ApiError } from '../errors.js';
import { toWireFeedEvent } from '../wire.js';
import { chatNotFound, refused, type MessagesDeps } from './message-rules.js';
import type { RuntimeRpc } from './rpc.js';

/**
 * The actions Telegram takes (Client.cpp's get_chat_action), by the names it reads them
 * by (any case), each as the name the feed carries: record_audio and upload_audio are
 * the older names of record_voice and upload_voice, pick_up_location of find_location.
 */
const ACTIONS: Readonly<Record<string, string>> = {
  typing: 'typing',
  upload_photo: 'upload_photo',
  record_video: 'record_video',
  upload_video: 'upload_video',
  record_voice: 'record_voice',
  record_audio: 'record_voice',
  upload_voice: 'upload_voice',
  upload_audio: 'upload_voice',
  upload_document: 'upload_document',
  choose_sticker: 'choose_sticker',
  find_location: 'find_location',
  pick_up_location: 'find_location',
  record_video_note: 'record_video_note',
  upload_video_note: 'upload_video_note',
};

/** Telegram's ChatFullInfo fields the platform has no notion of, as Telegram answers them for a chat without them. */
const CHAT_DEFAULTS = { accentColorId: 0, maxReactionCount: 11 };

export function createChatsService(deps: MessagesDeps): Pick<RuntimeRpc, 'sendChatAction' | 'getChat'> {
  return {
    async sendChatAction(req, { principal }) {
      if (!req.chatId) throw ApiError.invalid('chat_id', 'REQUIRED', 'is required');
      const action = ACTIONS[req.action.toLowerCase()];
      if (!action) throw refused('action', 'INVALID_ACTION', 'wrong parameter action in request');
      if (!(await deps.messages.chatType(principal.botId, req.chatId))) throw chatNotFound();
      await deps.events.announce({ botId: principal.botId, chatId: req.chatId, event: toWireFeedEvent({ chatAction: { chatId: req.chatId, action } }) });
      return { result: true };
    },

    async getChat(req, { principal }) {
      if (!req.chatId) throw ApiError.invalid('chat_id', 'REQUIRED', 'is required');
      const chat = await deps.messages.chat(principal.botId, req.chatId);
      if (!chat) throw chatNotFound();
      return { result: { id: req.chatId, ...chat, ...CHAT_DEFAULTS } };
    },
  };
}
