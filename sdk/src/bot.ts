/**
 * A bot in a few lines: the runtime client, a router of commands and button presses,
 * and the two ways of receiving updates (long polling, a webhook receiver) wired to it.
 *
 *   const bot = createBot(process.env.BOT_TOKEN!, { baseUrl });
 *   bot.command('start', (ctx) => ctx.reply('Hi!', { reply_markup: inlineKeyboard([[{ text: 'Yes', callback_data: 'yes' }]]) }));
 *   bot.callbackQuery('yes', (ctx) => ctx.editMessageText('You said yes'));
 *   await bot.start({ signal });
 */
import { createBotClient, type BotClient, type ClientOptions } from './clients.js';
import { runPolling, type PollingOptions } from './polling.js';
import { Router, type RouterOptions } from './router.js';
import { createNodeWebhookHandler, type WebhookHandlerOptions } from './webhook-adapters.js';

export interface BotOptions extends ClientOptions, Omit<RouterOptions, 'username'> {
  /** The bot's username, when known; otherwise getMe tells it, once, the first time a command names a bot. */
  username?: string;
}

/** A router bound to its bot's client, with polling and a webhook receiver that feed it. */
export class Bot extends Router {
  constructor(api: BotClient, options: Omit<BotOptions, keyof ClientOptions> = {}) {
    super(api, { ...options, username: options.username ?? (async () => (await api.getMe()).username) });
  }

  /**
   * Long-polls (runPolling) and hands each update to the router, until `signal` aborts.
   * Rejects as runPolling does (a webhook is set, another poller took over, the token is refused).
   */
  start(options: Omit<PollingOptions, 'onUpdate'> = {}): Promise<void> {
    return runPolling(this.api, { ...options, onUpdate: this.handleUpdate });
  }

  /** A node:http(s) request listener that verifies each webhook delivery and hands it to the router. */
  webhookHandler(options: Omit<WebhookHandlerOptions, 'onUpdate'>) {
    return createNodeWebhookHandler({ ...options, onUpdate: this.handleUpdate });
  }
}

/** A bot for this token: `bot.command`, `bot.callbackQuery`, `bot.on`, then `bot.start()` or `bot.webhookHandler()`; `bot.api` calls any method. */
export function createBot(token: string, options: BotOptions): Bot {
  const { username, autoAnswerCallbackQueries, ...client } = options;
  return new Bot(createBotClient(token, client), { username, autoAnswerCallbackQueries });
}
