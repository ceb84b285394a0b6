/** What both echo examples do with an update: say the text back in the same chat. */
import type { BotClient, Update } from '../src/index.js';

export async function echo(bot: BotClient, update: Update, log: (line: string) => void): Promise<void> {
  const message = update.message;
  if (!message?.chat || message.text === undefined) return;
  log(`update ${update.update_id} (seq ${update.update_seq}) from chat ${message.chat.id}: ${message.text}`);
  const sent = await bot.sendMessage({ chat_id: message.chat.id, text: message.text, reply_to_message_id: message.message_id });
  log(`replied with message ${sent.message_id} in chat ${message.chat.id}`);
}

/** Settings every example reads from the environment. */
export function botSettings(name: string) {
  const token = process.env.BOT_TOKEN;
  if (!token) {
    console.error(`${name}: set BOT_TOKEN to the bot's token (sbot_..., shown once as one_time_token after approval)`);
    process.exit(2);
  }
  return { token, baseUrl: process.env.BASE_URL ?? 'http://127.0.0.1:8080' };
}
