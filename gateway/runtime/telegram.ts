/**
 * Telegram's Bot API shape over the runtime RPCs, so existing bot frameworks run
 * unchanged: `/bot<token>/<method>` (GET or POST; JSON, form-encoded, query string or
 * multipart bodies; method names case-insensitive) and `/file/bot<token>/<file_path>`.
 * Every method is one or more calls of the runtime service through the same invoker
 * as the native routes (so auth, limits, quotas, metrics, logs and errors are the
 * core's); this module only renames parameters and results to Telegram's types:
 * `update_id` is the bot's update_seq, a negative offset is the newest -offset
 * updates, getMe's `id` is the bot's numeric user id (Message.from.id), photos are
 * PhotoSize arrays. The token is the path's and is never echoed or logged: the access
 * log and metrics name the route template, and errors never repeat the path.
 *
 * Typed end to end (telegram-bot-api's methods table, one typed entry per method):
 * RPCs are called by their generated definition (`RuntimeServiceService`), so requests
 * and responses are the generated message types and a misspelt method or field does not
 * compile; parameters are decoded into the request by the request type's descriptors
 * (the codec the native routes use). A file parameter is a `file_id` string or a
 * `StagedFile` — a value only the multipart parser makes, for a part this very request
 * staged — and nothing else.
 *
 * A multipart body is read only after its token is checked, its method known to take a
 * file, and an upload slot of the bot's and of the gateway's taken (telegram-uploads.ts):
 * no byte of it is stored for anyone without a valid token.
 */
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hashRanges, stagingKey } from '../../src/blobs/blob-store.js';
import { replyMarkupFromTelegram } from '../../src/messages/reply-markup.js';
import { compact, inlineButtonFromTelegram, inlineResultsFromTelegram, tgMessage, tgUpdate } from '../../src/telegram/bot-api.js';
import type { InputMedia } from '../../src/gen/botplatform/v1/runtime_service.js';
import { botUserId, UPDATE_KINDS, type Snake } from '../../src/wire.js';
import { SURFACE_METADATA } from '../../src/core/context.js';
import { ApiError } from '../../src/errors.js';
import { RuntimeServiceService } from '../../src/gen/botplatform/v1/runtime_service.js';
import { parseJsonBody } from './binding.js';
import type { Codec } from './codec.js';
import { routeNotFound, unsupportedMediaType } from './errors.js';
import { sendDownload, type FileRoutesOptions } from './file-routes.js';
import type { RouteSpec, RouteTable } from './schema.js';
import { MultipartBody, parseMultipartStream, StagedFile, tooLarge } from './telegram-multipart.js';
import { createUploadSlots, type UploadSlots } from './telegram-uploads.js';

type Runtime = typeof RuntimeServiceService;
/** A runtime RPC by its generated definition's name ("sendMessage"). */
type Rpc = keyof Runtime;
type RequestOf<K extends Rpc> = Parameters<Runtime[K]['requestSerialize']>[0];
/** The request fields of an RPC by their proto names (what Ctx.request binds parameters to). */
type FieldOf<K extends Rpc> = Snake<Extract<keyof RequestOf<K>, string>>;
type ResponseOf<K extends Rpc> = ReturnType<Runtime[K]['responseDeserialize']>;

export interface TelegramRoutesOptions {
  table: RouteTable;
  codec: Codec;
  files?: FileRoutesOptions;
  /** Text of a multipart body (and any other body), at most. */
  maxBodyBytes: number;
  /** File parts of a multipart body, together, at most. */
  maxFileBytes: number;
  /** Multipart uploads read at once, per bot and in all (UPLOADS_PER_BOT, UPLOADS_MAX). */
  uploads: { perBot: number; total: number };
  /** One call through the core chain; answers the RPC's response message. */
  call(spec: RouteSpec, message: unknown, metadata: Record<string, string>, request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
}

/**
 * A parameter as it came: text (query string, form, multipart field), a JSON value
 * (anything JSON.parse makes), or a file part this request's multipart body staged.
 */
type Param = unknown;

/** What one method has: its parameters, and the runtime RPCs of its caller. */
interface Ctx {
  /** The raw parameter (see Param). */
  param(name: string): Param;
  /**
   * The RPC's request from the named parameters (each a request field by its proto name,
   * or a Telegram name renamed to one), each decoded by the request type's descriptors: a wrong type
   * is a 400 naming the parameter. Unnamed parameters are ignored, as Telegram does.
   */
  request<K extends Rpc>(rpc: K, names: readonly FieldOf<K>[], rename?: Readonly<Record<string, FieldOf<K>>>): RequestOf<K>;
  /** As `request`, from values found inside a parameter (an album's media) rather than the parameters themselves. */
  requestOf<K extends Rpc>(rpc: K, values: Readonly<Record<string, Param>>, names: readonly FieldOf<K>[]): RequestOf<K>;
  rpc<K extends Rpc>(rpc: K, request: RequestOf<K>): Promise<ResponseOf<K>>;
  /** A file parameter as a file_id of the bot: the text given, or the staged part registered (see fileParam). */
  file(name: string, photo: boolean): Promise<string>;
}

interface Method {
  run(ctx: Ctx): Promise<unknown>;
  /** Whether it takes a file part (only these methods read a multipart body's files). */
  files?: true;
}

type EditRpc = 'editMessageText' | 'editMessageCaption' | 'editMessageReplyMarkup';

/**
 * An editMessage* method: the message by chat_id and message_id, its new inline keyboard
 * from reply_markup. There are no inline messages here: inline_message_id is refused by
 * name rather than answered as a missing chat_id (docs/telegram.md).
 */
function editMethod<K extends EditRpc>(rpc: K, names: readonly FieldOf<K>[]): Method {
  return {
    async run(ctx) {
      if (ctx.param('inline_message_id') !== undefined) {
        throw ApiError.invalid('inline_message_id', 'UNSUPPORTED', 'there are no inline messages here: edit a message by chat_id and message_id');
      }
      const req = ctx.request(rpc, names);
      req.replyMarkup = replyMarkupFromTelegram(ctx.param('reply_markup'));
      return tgMessage((await ctx.rpc(rpc, req)).result);
    },
  };
}

const IMAGE_TYPES: Record<string, string> = { jpg: 'image/jpeg', jpeg: 'image/jpeg', png: 'image/png', gif: 'image/gif', webp: 'image/webp' };

/**
 * allowed_updates as Telegram takes it: the kinds this platform never produces
 * (chat_member, poll_answer... — frameworks send their whole list) are accepted and
 * left out, as Telegram ignores kinds it has nothing of; a list of nothing but those
 * is refused, since the bot would wait for updates that never come.
 */
function allowedUpdates(v: Param): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      throw ApiError.invalid('allowed_updates', 'MALFORMED_JSON', 'is not valid JSON');
    }
  }
  if (!Array.isArray(v)) throw ApiError.invalid('allowed_updates', 'INVALID_TYPE', 'must be an array of update types');
  const kinds = v.filter((k): k is string => (UPDATE_KINDS as readonly unknown[]).includes(k));
  if (v.length > 0 && kinds.length === 0) {
    throw ApiError.invalid('allowed_updates', 'INVALID_VALUE', `only ${UPDATE_KINDS.join(', ')} updates are delivered here`);
  }
  return kinds;
}

/** A JSON object parameter, given as an object or as its JSON text (a form or query value). */
function objectParam(ctx: Ctx, name: string): Record<string, unknown> | undefined {
  let v = ctx.param(name);
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      throw ApiError.invalid(name, 'MALFORMED_JSON', 'is not valid JSON');
    }
  }
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v) || v instanceof StagedFile) throw ApiError.invalid(name, 'INVALID_TYPE', 'must be an object');
  return v as Record<string, unknown>;
}

/** An integer given as a JSON number or as its decimal text. */
function integerOf(v: unknown, name: string): number {
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) throw ApiError.invalid(name, 'INVALID_TYPE', 'must be an integer');
  return n;
}

/**
 * Which message a send replies to, as Telegram's clients give it: `reply_parameters` (the
 * newer spelling, an object or its JSON text: message_id, and chat_id and
 * allow_sending_without_reply; quote and its fields are accepted and ignored), or the
 * older `reply_to_message_id` and `allow_sending_without_reply` (which win when given). A
 * reply to another chat's message (reply_parameters.chat_id naming another chat) is not
 * served: sent without the reply when allow_sending_without_reply says so, else a 400.
 */
function replyParams(ctx: Ctx, req: { chatId: number; replyToMessageId?: number; allowSendingWithoutReply?: boolean }): void {
  const rp = objectParam(ctx, 'reply_parameters');
  if (!rp) return;
  if (rp.allow_sending_without_reply !== undefined && req.allowSendingWithoutReply === undefined) {
    const allow = rp.allow_sending_without_reply;
    if (typeof allow !== 'boolean') throw ApiError.invalid('reply_parameters.allow_sending_without_reply', 'INVALID_TYPE', 'must be a boolean');
    req.allowSendingWithoutReply = allow;
  }
  if (req.replyToMessageId !== undefined) return;
  if (rp.message_id === undefined) throw ApiError.invalid('reply_parameters.message_id', 'REQUIRED', 'is required');
  const messageId = integerOf(rp.message_id, 'reply_parameters.message_id');
  const chat = rp.chat_id;
  if (chat !== undefined && chat !== null && String(chat) !== String(req.chatId)) {
    if (req.allowSendingWithoutReply) return;
    throw ApiError.invalid('reply_parameters.chat_id', 'MESSAGE_NOT_FOUND', 'message to reply to not found in this chat (replies to another chat\'s message are not served)');
  }
  req.replyToMessageId = messageId;
}

const MAX_INT32 = 2 ** 31 - 1;

/** The InputMedia fields an album takes here; the others Telegram has (has_spoiler, thumbnail...) are left out, as Telegram ignores what does not apply. */
const INPUT_MEDIA_FIELDS = ['type', 'media', 'caption', 'parse_mode', 'caption_entities'] as const;

/** sendMediaGroup's media: a JSON array of InputMedia (or its text), each with the fields an album takes here. */
function inputMedia(v: Param): Param {
  if (v === undefined || v === null || v === '') throw ApiError.invalid('media', 'REQUIRED', 'is required');
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      throw ApiError.invalid('media', 'MALFORMED_JSON', "Can't parse media JSON object");
    }
  }
  if (!Array.isArray(v)) throw ApiError.invalid('media', 'INVALID_TYPE', 'Expected an Array of InputMedia');
  return v.map((item, i) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item) || item instanceof StagedFile) {
      throw ApiError.invalid(`media[${i}]`, 'INVALID_TYPE', "Can't parse InputMedia: expected an Object");
    }
    return Object.fromEntries(INPUT_MEDIA_FIELDS.filter((k) => (item as Record<string, unknown>)[k] !== undefined).map((k) => [k, (item as Record<string, unknown>)[k]]));
  });
}

/** The parameters every send method shares, besides its content. */
const SEND = ['chat_id', 'caption', 'reply_to_message_id', 'allow_sending_without_reply', 'parse_mode', 'caption_entities'] as const;

/** sendPhoto or sendDocument: the send parameters, and the file (a file_id or a part of this request). */
async function sendFile(ctx: Ctx, rpc: 'sendPhoto' | 'sendDocument', field: 'photo' | 'document'): Promise<unknown> {
  const req = ctx.request(rpc, SEND);
  replyParams(ctx, req);
  req.replyMarkup = replyMarkupFromTelegram(ctx.param('reply_markup'));
  req.fileId = await ctx.file(field, field === 'photo');
  return tgMessage((await ctx.rpc(rpc, req)).result);
}

/** The methods, by lower-case name. */
const METHODS: Record<string, Method> = {
  getme: {
    async run(ctx) {
      const me = (await ctx.rpc('getMe', {})).result!;
      return {
        // The numeric id the bot's messages carry in from.id (derived from its opaque id).
        id: botUserId(me.id),
        is_bot: true,
        first_name: me.name,
        username: me.username,
        can_join_groups: me.canJoinGroups,
        can_read_all_group_messages: false,
        supports_inline_queries: me.supportsInlineQueries,
      };
    },
  },

  getupdates: {
    async run(ctx) {
      const req = ctx.request('getUpdates', ['offset', 'limit', 'timeout']);
      req.allowedUpdates = allowedUpdates(ctx.param('allowed_updates')) ?? [];
      if (req.offset !== undefined && req.offset < 0) {
        // -offset is the request's int32 tail.
        if (req.offset < -MAX_INT32) throw ApiError.invalid('offset', 'OUT_OF_RANGE', `must be at least -${MAX_INT32}`);
        req.tail = -req.offset;
        req.offset = undefined;
      } else if (req.offset === 0) {
        req.offset = undefined;
      }
      return (await ctx.rpc('getUpdates', req)).result.map(tgUpdate);
    },
  },

  setwebhook: {
    async run(ctx) {
      const req = ctx.request('setWebhook', ['url', 'secret_token', 'max_connections', 'drop_pending_updates']);
      req.allowedUpdates = allowedUpdates(ctx.param('allowed_updates')) ?? [];
      return (await ctx.rpc('setWebhook', req)).result;
    },
  },

  deletewebhook: {
    async run(ctx) {
      return (await ctx.rpc('deleteWebhook', ctx.request('deleteWebhook', ['drop_pending_updates']))).result;
    },
  },

  getwebhookinfo: {
    async run(ctx) {
      const w = (await ctx.rpc('getWebhookInfo', {})).result!;
      return compact({
        url: w.url,
        has_custom_certificate: false,
        pending_update_count: w.pendingUpdateCount,
        max_connections: w.url ? w.maxConnections : undefined,
        allowed_updates: w.url && w.allowedUpdates.length ? w.allowedUpdates : undefined,
        last_error_date: w.lastErrorDate,
        last_error_message: w.lastErrorMessage,
      });
    },
  },

  sendmessage: {
    async run(ctx) {
      const req = ctx.request('sendMessage', ['chat_id', 'text', 'reply_to_message_id', 'allow_sending_without_reply', 'parse_mode', 'entities']);
      replyParams(ctx, req);
      req.replyMarkup = replyMarkupFromTelegram(ctx.param('reply_markup'));
      return tgMessage((await ctx.rpc('sendMessage', req)).result);
    },
  },

  sendphoto: {
    files: true,
    run: (ctx) => sendFile(ctx, 'sendPhoto', 'photo'),
  },

  senddocument: {
    files: true,
    run: (ctx) => sendFile(ctx, 'sendDocument', 'document'),
  },

  editmessagetext: editMethod('editMessageText', ['chat_id', 'message_id', 'text', 'parse_mode', 'entities']),
  editmessagecaption: editMethod('editMessageCaption', ['chat_id', 'message_id', 'caption', 'parse_mode', 'caption_entities']),
  editmessagereplymarkup: editMethod('editMessageReplyMarkup', ['chat_id', 'message_id']),

  deletemessage: {
    async run(ctx) {
      return (await ctx.rpc('deleteMessage', ctx.request('deleteMessage', ['chat_id', 'message_id']))).result;
    },
  },

  deletemessages: {
    async run(ctx) {
      return (await ctx.rpc('deleteMessages', ctx.request('deleteMessages', ['chat_id', 'message_ids']))).result;
    },
  },

  sendchataction: {
    async run(ctx) {
      return (await ctx.rpc('sendChatAction', ctx.request('sendChatAction', ['chat_id', 'action']))).result;
    },
  },

  copymessage: {
    async run(ctx) {
      const req = ctx.request('copyMessage', ['chat_id', 'from_chat_id', 'message_id', 'caption', 'parse_mode', 'caption_entities', 'reply_to_message_id', 'allow_sending_without_reply']);
      replyParams(ctx, req);
      req.replyMarkup = replyMarkupFromTelegram(ctx.param('reply_markup'));
      return { message_id: (await ctx.rpc('copyMessage', req)).result!.messageId };
    },
  },

  forwardmessage: {
    async run(ctx) {
      return tgMessage((await ctx.rpc('forwardMessage', ctx.request('forwardMessage', ['chat_id', 'from_chat_id', 'message_id']))).result);
    },
  },

  getchat: {
    async run(ctx) {
      const c = (await ctx.rpc('getChat', ctx.request('getChat', ['chat_id']))).result!;
      return compact({
        id: c.id, type: c.type, title: c.title, username: c.username, first_name: c.firstName, last_name: c.lastName,
        accent_color_id: c.accentColorId, max_reaction_count: c.maxReactionCount,
      });
    },
  },

  sendmediagroup: {
    files: true,
    async run(ctx) {
      const req = ctx.request('sendMediaGroup', ['chat_id', 'reply_to_message_id', 'allow_sending_without_reply']);
      replyParams(ctx, req);
      req.media = ctx.requestOf('sendMediaGroup', { media: inputMedia(ctx.param('media')) }, ['media']).media;
      // "attach://<name>": a file part of this multipart body, registered as a file of the bot.
      await Promise.all(req.media.map(async (m: InputMedia) => {
        if (m.media.startsWith('attach://')) m.media = await ctx.file(m.media.slice('attach://'.length), m.type === 'photo');
      }));
      return (await ctx.rpc('sendMediaGroup', req)).result.map(tgMessage);
    },
  },

  getfile: {
    async run(ctx) {
      const f = (await ctx.rpc('getFile', ctx.request('getFile', ['file_id']))).result!;
      // file_path is the file_id: /file/bot<token>/<file_id> downloads it.
      return compact({ file_id: f.fileId, file_unique_id: f.fileUniqueId, file_size: f.fileSize, file_path: f.fileId });
    },
  },

  // Nothing to log out of or close here (there is no other API server); the token is checked.
  logout: {
    async run(ctx) {
      await ctx.rpc('getMe', {});
      return true;
    },
  },
  close: {
    async run(ctx) {
      await ctx.rpc('getMe', {});
      return true;
    },
  },

  setmycommands: {
    async run(ctx) {
      return (await ctx.rpc('setMyCommands', ctx.request('setMyCommands', ['commands']))).result;
    },
  },
  getmycommands: {
    async run(ctx) {
      return (await ctx.rpc('getMyCommands', {})).result;
    },
  },
  deletemycommands: {
    async run(ctx) {
      return (await ctx.rpc('deleteMyCommands', {})).result;
    },
  },

  answercallbackquery: {
    async run(ctx) {
      const req = ctx.request('answerCallbackQuery', ['callback_query_id', 'text', 'show_alert', 'url', 'cache_time']);
      return (await ctx.rpc('answerCallbackQuery', req)).result;
    },
  },
  answerinlinequery: {
    async run(ctx) {
      const req = ctx.request('answerInlineQuery', ['inline_query_id', 'cache_time', 'is_personal', 'next_offset']);
      req.results = inlineResultsFromTelegram(ctx.param('results'));
      req.button = inlineButtonFromTelegram(ctx.param('button'), ctx.param('switch_pm_text'), ctx.param('switch_pm_parameter'));
      return (await ctx.rpc('answerInlineQuery', req)).result;
    },
  },
};

/**
 * Splits "<token>/<rest>" (the part of the path after /bot); the token is never reported.
 * The token may come in Telegram's form "<bot user id>:<token>" (aiogram and
 * pyTelegramBotAPI refuse a token without it, and aiogram reads the bot's id from it):
 * then `claimedId` is that id, checked against the bot's before anything else.
 */
function splitPath(rest: string): { token: string; tail: string; claimedId?: string } {
  const slash = rest.indexOf('/');
  const raw = slash < 0 ? rest : rest.slice(0, slash);
  const tail = slash < 0 ? '' : rest.slice(slash + 1);
  const m = /^(\d{1,20}):(.+)$/.exec(raw);
  return m ? { token: m[2]!, tail, claimedId: m[1]! } : { token: raw, tail };
}

/** Most tokens whose bot user id is remembered (the map starts over past this). */
const MAX_VERIFIED = 10_000;

/**
 * The Telegram methods over the gateway's route table and codec, for any caller that has
 * a method's parameters and a way to call the runtime RPCs: the routes below, and the
 * methods bots return in their answers to webhook deliveries (telegram-webhook-answers.ts).
 */
export function createTelegramMethods(table: RouteTable, codec: Codec) {
  const specs = new Map<string, RouteSpec>();
  for (const r of table.routes) {
    if (r.rpc.startsWith('botplatform.v1.RuntimeService/') && r.method === 'POST') specs.set(r.grpc.path, r);
  }
  const specOf = (rpc: Rpc): RouteSpec => {
    const spec = specs.get(RuntimeServiceService[rpc].path);
    if (!spec) throw new Error(`no POST route for ${rpc}`);
    return spec;
  };

  /** The request of `rpc` from the named parameters (see Ctx.request). */
  function decodeRequest<K extends Rpc>(rpc: K, params: ReadonlyMap<string, Param>, names: readonly string[], rename: Readonly<Record<string, string>> = {}): RequestOf<K> {
    // names and rename's values are the request's fields by construction (Ctx.request's types).
    const type = specOf(rpc).requestType;
    const fields = codec.lookup(type);
    const message = codec.emptyMessage(type);
    for (const name of [...names, ...Object.keys(rename)]) {
      const value = params.get(name);
      if (value === undefined) continue;
      const f = fields.get(rename[name] ?? name);
      if (!f) throw new Error(`${type} has no field ${rename[name] ?? name}`);
      if (value instanceof StagedFile) throw ApiError.invalid(name, 'INVALID_TYPE', 'must not be a file');
      if (typeof value === 'string' && (f.repeated || f.type.kind === 'message' || f.type.kind === 'map')) {
        // A list or object given as text (a form or query value, a multipart field) is JSON.
        let json: unknown;
        try {
          json = JSON.parse(value);
        } catch {
          throw ApiError.invalid(name, 'MALFORMED_JSON', 'is not valid JSON');
        }
        message[f.ts] = codec.decodeField(f, json, name);
      } else {
        message[f.ts] = codec.decodeField(f, value, name, typeof value === 'string');
      }
    }
    return message as RequestOf<K>;
  }

  /**
   * The context a method runs in, from a request's parameters, its RPCs (as its bot) and
   * how it reads a file parameter.
   */
  function context(params: ReadonlyMap<string, Param>, rpc: Ctx['rpc'], file: (ctx: Ctx, name: string, photo: boolean) => Promise<string>): Ctx {
    const ctx: Ctx = {
      param: (name) => params.get(name),
      request: (name, names, rename) => decodeRequest(name, params, names, rename),
      requestOf: (name, values, names) => decodeRequest(name, new Map(Object.entries(values)), names),
      rpc,
      file: (name, photo) => file(ctx, name, photo),
    };
    return ctx;
  }

  return {
    specOf,
    context,
    /** A method by its name (any case), or undefined. */
    method: (name: string): Method | undefined => (Object.hasOwn(METHODS, name.toLowerCase()) ? METHODS[name.toLowerCase()] : undefined),
  };
}

export type TelegramMethods = ReturnType<typeof createTelegramMethods>;

export function registerTelegramRoutes(app: FastifyInstance, opts: TelegramRoutesOptions): void {
  const { specOf, context, method: methodOf } = createTelegramMethods(opts.table, opts.codec);

  const config = { surface: 'runtime' as const };
  /** The file parts a request's multipart body staged (only these are its files). */
  const staged = new WeakMap<object, { keys: string[]; files?: ReadonlySet<StagedFile> }>();
  const slots: UploadSlots = createUploadSlots(opts.uploads);
  /** A request's upload slot, given back when it is answered or abandoned. */
  const held = new WeakMap<object, () => void>();

  /**
   * A file parameter as a file_id: the text given, or a part this request staged,
   * registered as a file of the bot through the upload flow's own RPCs (content reuse,
   * possession proof read back from the staged bytes, or the staged object promoted to
   * the upload's staging key and completed). Anything else (an object, a number, a
   * part of another request) is a 400.
   */
  async function fileParam(request: FastifyRequest, ctx: Ctx, name: string, photo: boolean): Promise<string> {
    const v = ctx.param(name);
    if (v === undefined || v === null || v === '') throw ApiError.invalid(name, 'REQUIRED', 'is required');
    if (typeof v === 'string') return v;
    if (!(v instanceof StagedFile) || !staged.get(request.raw)?.files?.has(v)) {
      throw ApiError.invalid(name, 'INVALID_TYPE', 'must be a file_id or a file uploaded in this multipart body');
    }
    const files = opts.files;
    if (!files) throw ApiError.invalid(name, 'UPLOAD_UNAVAILABLE', 'file uploads are not served here; send a file_id');
    const ext = v.fileName.split('.').pop()?.toLowerCase() ?? '';
    let type = v.contentType;
    if (!type || type === 'application/octet-stream') type = IMAGE_TYPES[ext] ?? (photo ? 'image/jpeg' : 'application/octet-stream');
    const creds = (await ctx.rpc('createUploadCredentials', {
      fileName: v.fileName || (photo ? 'photo.jpg' : 'document'), fileSize: v.size, checksum: v.sha256, fileType: type, reuseRequestId: '', reuseExisting: true,
    })).result!;
    if (creds.possessionRequired) {
      const c = creds.possessionChallenge!;
      const hash = crypto.createHash('sha256').update(Buffer.from(c.nonce, 'hex'));
      await hashRanges(files.blobs, v.key, c.ranges, hash);
      const proven = (await ctx.rpc('provePossession', { challengeId: c.challengeId, proof: hash.digest('hex') })).result!;
      return proven.fileId!;
    }
    if (!creds.uploadRequired) return creds.fileId!;
    const grantToken = String(creds.uploadUrl).split('/api/v1/files/upload/')[1] ?? '';
    const grant = files.signer.verify(grantToken, 'upload');
    if (!('ok' in grant)) throw new Error('the core handed out an upload URL this gateway cannot verify');
    if (grant.ok.size !== v.size || grant.ok.sha256 !== v.sha256) throw new Error('the core granted an upload of other bytes than the staged ones');
    await files.blobs.promote(v.key, stagingKey(grant.ok.id));
    const done = (await ctx.rpc('completeUpload', { checksum: v.sha256, reuseRequestId: '' })).result!;
    return done.fileId;
  }

  // SHA-256 of a token → its bot's user id, learnt from one GetMe: a token's bot never
  // changes (a revoked token still fails its own call).
  const userIds = new Map<string, number>();
  /** A Telegram-form token's id must be its bot's user id (else 401, as any bad token). */
  async function checkClaimedId(token: string, claimedId: string | undefined, getMe: () => Promise<ResponseOf<'getMe'>>): Promise<void> {
    if (claimedId === undefined) return;
    const key = crypto.createHash('sha256').update(token).digest('hex');
    let id = userIds.get(key);
    if (id === undefined) {
      id = botUserId((await getMe()).result!.id);
      if (userIds.size >= MAX_VERIFIED) userIds.clear();
      userIds.set(key, id);
    }
    if (String(id) !== claimedId) throw ApiError.unauthenticated('invalid bot token');
  }

  /** The runtime RPCs of one request, as its token's bot. */
  function rpcOf(request: FastifyRequest, reply: FastifyReply, token: string) {
    const metadata = { authorization: `Bearer ${token}`, [SURFACE_METADATA]: 'telegram' };
    return <K extends Rpc>(rpc: K, message: RequestOf<K>) =>
      opts.call(specOf(rpc), message, metadata, request, reply) as Promise<ResponseOf<K>>;
  }

  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, parseJsonBody);
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    });
    // Multipart bodies stream: text parts within MAX_BODY_BYTES, file parts into the blob
    // store within MAX_FILE_BYTES (telegram-multipart.ts). Before a byte is read, the
    // method must take a file, the token must be a bot's, and an upload slot must be free
    // (preParsing below). Staged parts are removed once the request is answered (or
    // abandoned).
    const limits = { maxTextBytes: opts.maxBodyBytes, maxFileBytes: opts.maxFileBytes };
    const isMultipart = (request: FastifyRequest) => /^multipart\/form-data\b/i.test(String(request.headers['content-type'] ?? ''));
    scope.addHook('preParsing', async (request, reply, payload) => {
      if (!isMultipart(request)) return payload;
      const declared = Number(request.headers['content-length']);
      if (declared > limits.maxTextBytes + limits.maxFileBytes) throw tooLarge('the request body');
      const entry: { keys: string[]; files?: ReadonlySet<StagedFile> } = { keys: [] };
      staged.set(request.raw, entry);
      if (request.routeOptions.url !== '/bot*') return payload;
      const { token, tail, claimedId } = splitPath((request.params as { '*': string })['*']);
      const method = methodOf(tail);
      if (!method || tail.includes('/')) throw routeNotFound('runtime', request.method);
      if (!method.files || !opts.files) return payload; // text parts only: a file part is refused unread
      // The token, before any byte is stored: the bot's own GetMe through the core.
      const rpc = rpcOf(request, reply, token);
      const me = await rpc('getMe', {});
      await checkClaimedId(token, claimedId, async () => me);
      held.set(request.raw, slots.take(me.result!.id));
      return payload;
    });
    scope.addContentTypeParser('multipart/form-data', async (request: FastifyRequest, payload: NodeJS.ReadableStream) => {
      const entry = staged.get(request.raw)!;
      const files = held.has(request.raw);
      const body = await parseMultipartStream(payload as AsyncIterable<Buffer>, String(request.headers['content-type']), files ? opts.files?.blobs : undefined, { ...limits, files }, entry.keys);
      entry.files = body.files;
      return body;
    });
    const release = async (request: FastifyRequest) => {
      held.get(request.raw)?.();
      held.delete(request.raw);
      const entry = staged.get(request.raw);
      staged.delete(request.raw);
      if (entry && opts.files) await Promise.all(entry.keys.map((k) => opts.files!.blobs.delete(k).catch(() => {})));
    };
    scope.addHook('onResponse', release);
    scope.addHook('onRequestAbort', release);
    // A refused body is not read to its end: the connection closes after the answer.
    scope.addHook('onSend', async (request, reply, payload) => {
      if (reply.statusCode === 413 || (isMultipart(request) && !request.raw.complete)) reply.header('connection', 'close');
      return payload;
    });
    scope.addContentTypeParser('*', (_req, payload, done) => {
      payload.resume();
      done(unsupportedMediaType(), undefined);
    });

    scope.route({
      method: ['GET', 'POST'],
      url: '/bot*',
      config,
      handler: async (request, reply) => {
        const { token, tail, claimedId } = splitPath((request.params as { '*': string })['*']);
        const method = methodOf(tail);
        if (!method || tail.includes('/')) throw routeNotFound('runtime', request.method);
        const params = paramsOf(request.query, request.body);
        const rpc = rpcOf(request, reply, token);
        const ctx = context(params, rpc, (c, name, photo) => fileParam(request, c, name, photo));
        if (!held.has(request.raw)) await checkClaimedId(token, claimedId, () => rpc('getMe', {}));
        const result = await method.run(ctx);
        return reply.code(200).type('application/json').send({ ok: true, result: result ?? null });
      },
    });

    scope.get('/file/bot*', { config }, async (request, reply) => {
      const { token, tail, claimedId } = splitPath((request.params as { '*': string })['*']);
      if (!tail) throw routeNotFound('runtime', request.method);
      if (!opts.files) throw ApiError.notFound('file');
      const rpc = rpcOf(request, reply, token);
      await checkClaimedId(token, claimedId, () => rpc('getMe', {}));
      const file = (await rpc('getFile', { fileId: tail })).result!;
      const grant = String(file.downloadUrl ?? '').split('/api/v1/files/download/')[1];
      if (!grant) throw ApiError.notFound('file');
      return sendDownload(opts.files, grant, reply);
    });
  });
}

/**
 * A request's parameters by name: the query string's, then the body's (JSON object,
 * form, or multipart fields and files). A JSON body must be an object.
 */
function paramsOf(query: unknown, body: unknown): Map<string, Param> {
  const params = new Map<string, Param>(Object.entries(query as Record<string, string>));
  if (body instanceof MultipartBody) {
    for (const [k, v] of body.fields) params.set(k, v);
  } else if (body !== undefined) {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw ApiError.invalid('body', 'INVALID_TYPE', 'must be a JSON object');
    for (const [k, v] of Object.entries(body)) params.set(k, v);
  }
  return params;
}
