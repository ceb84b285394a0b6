/**
 * Routing updates to handlers, as bot frameworks do: commands (`/start`, `/help@mybot
 * args`) from the message's bot_command entity at offset 0, callback queries by their
 * data and inline queries by their text (a string or a RegExp), and any update kind. A router is an update handler, so
 * it plugs into runPolling and every webhook receiver (`onUpdate: router.handleUpdate`);
 * `createBot` (bot.ts) wires it in for you.
 */
import type { BotClient } from './clients.js';
import type { CallOptions } from './http.js';
import type {
  AnswerCallbackQueryRequest,
  AnswerInlineQueryRequest,
  CallbackQuery,
  Chat,
  EditMessageReplyMarkupRequest,
  EditMessageTextRequest,
  InlineKeyboardButtonInput,
  InlineQuery,
  Message,
  ReplyMarkupInput,
  SendMessageRequest,
  Update,
  User,
} from './generated/api.js';

/** The update kinds a handler can be registered for with `on`. */
export type UpdateKind = 'message' | 'edited_message' | 'callback_query' | 'inline_query';

/** What a handler may do with the update it was given. */
export class Context {
  constructor(
    /** The update. */
    readonly update: Update,
    /** The bot's runtime client, for any call. */
    readonly api: BotClient,
  ) {}

  /** The new or edited message, or the message of the button pressed. */
  get message(): Message | undefined {
    return this.update.message ?? this.update.edited_message ?? this.update.callback_query?.message ?? undefined;
  }

  /** The chat the update happened in, when it has one (an inline query has none). */
  get chat(): Chat | undefined {
    return this.message?.chat ?? undefined;
  }

  /** Who sent the message, pressed the button or typed the inline query. */
  get from(): User | undefined {
    const u = this.update;
    return (u.callback_query?.from ?? u.inline_query?.from ?? u.message?.from ?? u.edited_message?.from) ?? undefined;
  }

  /** Sends a message to the update's chat. */
  reply(text: string, extra: Omit<SendMessageRequest, 'chat_id' | 'text'> = {}, options?: CallOptions): Promise<Message> {
    return this.api.sendMessage({ ...extra, chat_id: this.requireChat('reply'), text }, options);
  }

  /** Shows an action ("typing", "upload_photo"...) in the update's chat until the next message, for at most 5 seconds. */
  sendChatAction(action: string, options?: CallOptions): Promise<boolean> {
    return this.api.sendChatAction({ chat_id: this.requireChat('sendChatAction'), action }, options);
  }

  protected requireChat(what: string): number {
    const chat = this.chat;
    if (!chat) throw new TypeError(`${what}: this update has no chat`);
    return chat.id;
  }
}

/** A command's context: the command's name and what follows it. */
export class CommandContext extends Context {
  constructor(
    update: Update,
    api: BotClient,
    /** The command without its slash and @username, e.g. "start". */
    readonly command: string,
    /** The text after the command, leading white space removed ("" when none). */
    readonly args: string,
  ) {
    super(update, api);
  }
}

/** A callback query's context: its data, the match of a RegExp, and the answer and edit helpers. */
export class CallbackQueryContext extends Context {
  #answered = false;
  constructor(
    update: Update,
    api: BotClient,
    /** The RegExp's match of the data (for a string pattern: the data as the only element). */
    readonly match: RegExpMatchArray | [string],
  ) {
    super(update, api);
  }

  /** The query. */
  get callbackQuery(): CallbackQuery {
    return this.update.callback_query!;
  }

  /** The pressed button's callback_data. */
  get data(): string {
    return this.update.callback_query?.data ?? '';
  }

  /** Whether the query was answered (by `answer`, or by the router after the handler). */
  get answered(): boolean {
    return this.#answered;
  }

  /** Answers the query (a notification, an alert, or nothing): the user's client stops waiting. */
  async answer(answer: Omit<AnswerCallbackQueryRequest, 'callback_query_id'> = {}, options?: CallOptions): Promise<boolean> {
    this.#answered = true;
    return this.api.answerCallbackQuery({ ...answer, callback_query_id: this.callbackQuery.id }, options);
  }

  /** Replaces the text (and keyboard: unset removes it, as Telegram does) of the message whose button was pressed. */
  editMessageText(text: string, extra: Omit<EditMessageTextRequest, 'chat_id' | 'message_id' | 'text'> = {}, options?: CallOptions): Promise<Message> {
    return this.api.editMessageText({ ...extra, ...this.target('editMessageText'), text }, options);
  }

  /** Replaces (or, unset, removes) the keyboard of the message whose button was pressed. */
  editMessageReplyMarkup(replyMarkup?: EditMessageReplyMarkupRequest['reply_markup'], options?: CallOptions): Promise<Message> {
    return this.api.editMessageReplyMarkup({ ...this.target('editMessageReplyMarkup'), reply_markup: replyMarkup }, options);
  }

  private target(what: string): { chat_id: number; message_id: number } {
    const m = this.callbackQuery.message;
    if (!m?.chat) throw new TypeError(`${what}: the callback query carries no message`);
    return { chat_id: m.chat.id, message_id: m.message_id };
  }
}

/** An inline query's context: the query, the match of a RegExp, and the answer helper. */
export class InlineQueryContext extends Context {
  constructor(
    update: Update,
    api: BotClient,
    /** The RegExp's match of the query's text (otherwise the text as the only element). */
    readonly match: RegExpMatchArray | [string] = [update.inline_query?.query ?? ''],
  ) {
    super(update, api);
  }

  /** The query. */
  get inlineQuery(): InlineQuery {
    return this.update.inline_query!;
  }

  /** Answers the query with its results (at most 50), and optionally next_offset, cache_time, is_personal, button. */
  answer(results: AnswerInlineQueryRequest['results'], extra: Omit<AnswerInlineQueryRequest, 'inline_query_id' | 'results'> = {}, options?: CallOptions): Promise<boolean> {
    return this.api.answerInlineQuery({ ...extra, inline_query_id: this.inlineQuery.id, results }, options);
  }
}

export type Handler<C extends Context = Context> = (ctx: C) => unknown;

/** A command found at the start of a message: its name, the bot it names (if any), and its arguments. */
export interface ParsedCommand {
  command: string;
  /** The @username after the command, when given ("/start@my_bot"). */
  username?: string;
  args: string;
}

/**
 * The command a message starts with: its bot_command entity at offset 0 (of the text,
 * or of a caption), as Telegram and the platform mark it. Offsets are UTF-16 code
 * units, which is how JavaScript strings index.
 */
export function parseCommand(message: Message): ParsedCommand | undefined {
  const [text, entities] = message.text !== undefined ? [message.text, message.entities] : [message.caption, message.caption_entities];
  if (text === undefined) return undefined;
  const e = (entities ?? []).find((x) => x.type === 'bot_command' && x.offset === 0);
  if (!e || e.length < 2) return undefined;
  const [command = '', username] = text.slice(1, e.length).split('@', 2);
  return { command, username: username || undefined, args: text.slice(e.length).replace(/^\s+/, '') };
}

/** A native inline keyboard from rows of buttons, as Telegram writes them: `inlineKeyboard([[{ text: 'Yes', callback_data: 'yes' }]])`. */
export function inlineKeyboard(rows: InlineKeyboardButtonInput[][]): ReplyMarkupInput {
  return { inline_keyboard: rows.map((buttons) => ({ buttons })) };
}

export interface RouterOptions {
  /**
   * The bot's username (or how to get it), so that "/start@other_bot" in a group is left
   * to the other bot. createBot asks getMe once. Without it, a command naming any bot is
   * taken.
   */
  username?: string | (() => Promise<string>);
  /**
   * Answer a callback query the handler left unanswered, once it returns, so the user's
   * client stops waiting (default true). A handler that throws leaves it unanswered.
   */
  autoAnswerCallbackQueries?: boolean;
}

/** The first pattern's match of the text: equal to a string, or a RegExp's match. */
function matchOf(patterns: (string | RegExp)[], text: string | undefined): RegExpMatchArray | [string] | undefined {
  if (text === undefined) return undefined;
  for (const p of patterns) {
    if (typeof p === 'string') {
      if (p === text) return [text];
      continue;
    }
    p.lastIndex = 0; // a global or sticky RegExp starts over for each text
    const m = p.exec(text);
    if (m) return m;
  }
  return undefined;
}

interface Route {
  kind: UpdateKind;
  run(update: Update, api: BotClient): Promise<boolean>;
}

/**
 * Handlers in the order they were registered: an update goes to the first whose
 * pattern matches it, and only to it. `handleUpdate` resolves once that handler has
 * (and rejects if it threw), so runPolling reports it and a webhook answers 500.
 */
export class Router {
  readonly #routes: Route[] = [];
  readonly #options: RouterOptions;
  #username?: Promise<string>;

  constructor(
    /** The client handlers' contexts call with. */
    readonly api: BotClient,
    options: RouterOptions = {},
  ) {
    this.#options = options;
  }

  /** Handles messages (and captions) starting with one of the commands, e.g. `command('start', ...)` or `command(['help', 'h'], ...)`. */
  command(names: string | string[], handler: Handler<CommandContext>): this {
    const wanted = (Array.isArray(names) ? names : [names]).map((n) => n.replace(/^\//, ''));
    this.#routes.push({
      kind: 'message',
      run: async (update, api) => {
        const message = update.message;
        const parsed = message ? parseCommand(message) : undefined;
        if (!parsed || !wanted.includes(parsed.command)) return false;
        if (parsed.username && !(await this.#isOwnUsername(parsed.username))) return false;
        await handler(new CommandContext(update, api, parsed.command, parsed.args));
        return true;
      },
    });
    return this;
  }

  /** Handles presses of buttons whose callback_data equals the string, or matches the RegExp. */
  callbackQuery(pattern: string | RegExp | (string | RegExp)[], handler: Handler<CallbackQueryContext>): this {
    const patterns = Array.isArray(pattern) ? pattern : [pattern];
    this.#routes.push({
      kind: 'callback_query',
      run: async (update, api) => {
        const match = matchOf(patterns, update.callback_query?.data);
        if (!match) return false;
        const ctx = new CallbackQueryContext(update, api, match);
        await handler(ctx);
        if (!ctx.answered && this.#options.autoAnswerCallbackQueries !== false) await ctx.answer();
        return true;
      },
    });
    return this;
  }

  /** Handles inline queries whose text equals the string, or matches the RegExp (a bot with supports_inline_queries gets them). */
  inlineQuery(pattern: string | RegExp | (string | RegExp)[], handler: Handler<InlineQueryContext>): this {
    const patterns = Array.isArray(pattern) ? pattern : [pattern];
    this.#routes.push({
      kind: 'inline_query',
      run: async (update, api) => {
        const match = matchOf(patterns, update.inline_query?.query);
        if (!match) return false;
        await handler(new InlineQueryContext(update, api, match));
        return true;
      },
    });
    return this;
  }

  /** Handles every update of a kind that no earlier handler took. */
  on(kind: 'callback_query', handler: Handler<CallbackQueryContext>): this;
  on(kind: 'inline_query', handler: Handler<InlineQueryContext>): this;
  on(kind: UpdateKind, handler: Handler<Context>): this;
  on(kind: UpdateKind, handler: Handler<never>): this {
    this.#routes.push({
      kind,
      run: async (update, api) => {
        if (!update[kind]) return false;
        if (kind === 'callback_query') {
          const ctx = new CallbackQueryContext(update, api, [update.callback_query?.data ?? '']);
          await (handler as Handler<CallbackQueryContext>)(ctx);
          if (!ctx.answered && this.#options.autoAnswerCallbackQueries !== false) await ctx.answer();
        } else if (kind === 'inline_query') {
          await (handler as Handler<InlineQueryContext>)(new InlineQueryContext(update, api));
        } else {
          await (handler as Handler<Context>)(new Context(update, api));
        }
        return true;
      },
    });
    return this;
  }

  /** Runs the first matching handler; resolves whether one took the update. Bound: pass it as `onUpdate`. */
  readonly handleUpdate = async (update: Update): Promise<boolean> => {
    for (const route of this.#routes) {
      if (!update[route.kind]) continue;
      if (await route.run(update, this.api)) return true;
    }
    return false;
  };

  async #isOwnUsername(name: string): Promise<boolean> {
    const u = this.#options.username;
    if (u === undefined) return true;
    if (typeof u === 'string') return u.toLowerCase() === name.toLowerCase();
    this.#username ??= u().catch((err: unknown) => {
      this.#username = undefined; // asked again next time
      throw err;
    });
    return (await this.#username).toLowerCase() === name.toLowerCase();
  }
}
