import type { Knex } from 'knex';

/**
 * Issue 33's review: the console's ListChatMessages pages through the messages a bot sent
 * to one chat, newest first, and counts them (messages-repo.ts's listSent). The primary key
 * (bot_id, chat_id, message_id) finds the chat but not which of its messages are the bot's:
 * each page and each count read the chat's received messages too. This index holds the
 * bot's own in message order, so a page reads only them and the count only the index.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('messages', (t) => {
    t.index(['bot_id', 'chat_id', 'outbound', 'message_id'], 'messages_chat_sent');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('messages', (t) => {
    t.dropIndex(['bot_id', 'chat_id', 'outbound', 'message_id'], 'messages_chat_sent');
  });
}
