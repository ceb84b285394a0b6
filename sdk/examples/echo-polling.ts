/**
 * Echo bot by long polling.
 *
 *   BOT_TOKEN=sbot_... npm run example:echo-polling
 *
 * BASE_URL is the service (default http://127.0.0.1:8080, where `npm start` listens).
 * Ctrl-C stops it cleanly: the updates handled so far are confirmed first.
 */
import { createBotClient, runPolling } from '../src/index.js';
import { botSettings, echo } from './echo.js';

const { token, baseUrl } = botSettings('echo-polling');
const bot = createBotClient(token, { baseUrl });
const log = (line: string) => console.log(`echo-polling: ${line}`);

const me = await bot.getMe();
// Polling rule 1: a bot receives by webhook or by polling, never both. Remove any webhook.
await bot.deleteWebhook();
log(`@${me.username} is polling ${baseUrl}`);

const stop = new AbortController();
process.once('SIGINT', () => stop.abort());
process.once('SIGTERM', () => stop.abort());
await runPolling(bot, {
  signal: stop.signal,
  timeoutSeconds: 30,
  onUpdate: (update) => echo(bot, update, log),
  onError: (err, info) => log(`${info.update ? `update ${info.update.update_id} failed` : `retrying in ${info.retryInMs} ms`}: ${(err as Error).message}`),
});
log('stopped');
