/**
 * Chats and messages: which chats a bot may write to, the ids of messages it may
 * reply to, and sent messages, stored together with the outbox message that
 * announces them to the platform's messaging services.
 */
import { MESSAGES_TOPIC } from '../bus/topics.js';
import { isMysql, transaction, type Db } from './db.js';

export function createMessagesRepo(db: Db) {
  const mysql = isMysql(db);
  return {
    /** The chat's type, when it has written to the bot; else undefined. */
    async chatType(botId: string, chatId: number): Promise<string | undefined> {
      const row = await db('chats').where({ bot_id: botId, chat_id: chatId }).first('type');
      return row?.type;
    },

    async messageExists(botId: string, chatId: number, messageId: number): Promise<boolean> {
      return Boolean(await db('messages').where({ bot_id: botId, chat_id: chatId, message_id: messageId }).first('message_id'));
    },

    /**
     * Stores a sent message with the bot's next message id and queues it for the
     * messaging services (outbox → bus), in one transaction. `build` makes the
     * wire message from its id and the sending bot's username and name (read with
     * the counter).
     */
    async send(
      botId: string, chatId: number, now: number,
      build: (messageId: number, bot: { username: string; name: string }) => Record<string, unknown>,
    ) {
      return transaction(db, async (tx) => {
        let q = tx('bots').where({ id: botId }).first('last_message_id', 'username', 'name');
        if (mysql) q = q.forUpdate();
        const row = await q;
        const messageId = Number(row.last_message_id) + 1;
        await tx('bots').where({ id: botId }).update({ last_message_id: messageId });
        const message = build(messageId, { username: row.username, name: row.name });
        await tx('messages').insert({
          bot_id: botId, chat_id: chatId, message_id: messageId, outbound: true, payload: JSON.stringify(message), created_at: now,
        });
        await tx('outbox').insert({
          topic: MESSAGES_TOPIC, msg_key: botId, payload: JSON.stringify({ bot_id: botId, message }), created_at: now,
        });
        return message;
      });
    },
  };
}

export type MessagesRepo = ReturnType<typeof createMessagesRepo>;
