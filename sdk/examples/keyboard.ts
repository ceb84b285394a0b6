/**
 * A keyboard bot by long polling: /start answers with a formatted message and an inline
 * keyboard; each press of + or − is a callback query, answered with a notification, and
 * the message is edited to the new count (its keyboard kept); /help lists the commands.
 *
 *   BOT_TOKEN=sbot_... npm run example:keyboard
 *
 * BASE_URL is the service (default http://127.0.0.1:8080). Press the buttons in the
 * console's Test tab (docs/console.md). Ctrl-C stops it cleanly.
 */
import { createBot, inlineKeyboard, type ReplyMarkupInput } from '../src/index.js';
import { botSettings } from './echo.js';

const { token, baseUrl } = botSettings('keyboard');
const bot = createBot(token, { baseUrl });
const log = (line: string) => console.log(`keyboard: ${line}`);

/** The counter's keyboard; the count travels in callback_data, so the bot keeps no state. */
const counter = (n: number): ReplyMarkupInput => inlineKeyboard([
  [{ text: '−', callback_data: `count:${n - 1}` }, { text: '+', callback_data: `count:${n + 1}` }],
  [{ text: 'What is this?', url: 'https://core.telegram.org/bots/features#inline-keyboards' }],
]);

bot.command('start', async (ctx) => {
  const sent = await ctx.reply('<b>Counter</b>: 0', { parse_mode: 'HTML', reply_markup: counter(0) });
  log(`/start in chat ${ctx.chat?.id}: sent message ${sent.message_id} with a keyboard`);
});

bot.command('help', (ctx) => ctx.reply('/start shows a counter with buttons; /help shows this.'));

bot.callbackQuery(/^count:(-?\d+)$/, async (ctx) => {
  const n = Number(ctx.match[1]);
  await ctx.answer({ text: `Count is now ${n}` });
  const edited = await ctx.editMessageText(`<b>Counter</b>: ${n}`, { parse_mode: 'HTML', reply_markup: counter(n) });
  log(`pressed ${ctx.data} on message ${edited.message_id}: count ${n}`);
});

bot.on('message', (ctx) => ctx.reply('Send /start for a counter.'));

const me = await bot.api.getMe();
// A bot receives by webhook or by polling, never both.
await bot.api.deleteWebhook();
await bot.api.setMyCommands({ commands: [{ command: 'start', description: 'Show a counter' }, { command: 'help', description: 'What this bot does' }] });
log(`@${me.username} is polling ${baseUrl}`);

const stop = new AbortController();
process.once('SIGINT', () => stop.abort());
process.once('SIGTERM', () => stop.abort());
await bot.start({
  signal: stop.signal,
  onError: (err, info) => log(`${info.update ? `update ${info.update.update_id} failed` : `retrying in ${info.retryInMs} ms`}: ${(err as Error).message}`),
});
log('stopped');
