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
 */
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { stagingKey } from '../../src/blobs/blob-store.js';
import { botUserId } from '../../src/domain/messages-service.js';
import { compact, tgMessage, tgUpdate } from '../../src/domain/telegram-types.js';
import { UPDATE_KINDS } from '../../src/domain/wire.js';
import { SURFACE_METADATA } from '../../src/core/context.js';
import { ApiError } from '../../src/errors.js';
import type { Codec } from './codec.js';
import { routeNotFound, unsupportedMediaType } from './errors.js';
import { sendDownload, type FileRoutesOptions } from './file-routes.js';
import type { RouteSpec, RouteTable } from './schema.js';
import { parseMultipartStream, tooLarge, type StagedFilePart } from './telegram-multipart.js';

type Obj = Record<string, unknown>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Wire = any;

/** Parameters by name: text (query, form, multipart field), JSON values, or an uploaded file. */
type Params = Record<string, unknown>;

export interface TelegramRoutesOptions {
  table: RouteTable;
  codec: Codec;
  files?: FileRoutesOptions;
  /** Text of a multipart body (and any other body), at most. */
  maxBodyBytes: number;
  /** File parts of a multipart body, together, at most. */
  maxFileBytes: number;
  /** One call through the core chain; answers the RPC's result as its JSON wire value. */
  call(spec: RouteSpec, message: unknown, metadata: Record<string, string>, request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
}

/** What one method call can do: call an RPC by short name with native JSON-ish params. */
interface Ctx {
  rpc(name: string, params: Params): Promise<Wire>;
  params: Params;
  files?: FileRoutesOptions;
}

const num = (v: unknown) => (v === undefined || v === null ? undefined : Number(v));

/** Only the named parameters, renamed where Telegram's name differs from the RPC's. */
function pick(params: Params, names: string[], rename: Record<string, string> = {}): Params {
  const out: Params = {};
  for (const n of names) if (params[n] !== undefined) out[rename[n] ?? n] = params[n];
  return out;
}

const isFile = (v: unknown): v is StagedFilePart => typeof v === 'object' && v !== null && (v as StagedFilePart).upload === true;

const IMAGE_TYPES: Record<string, string> = { jpg: 'image/jpeg', jpeg: 'image/jpeg', png: 'image/png', gif: 'image/gif', webp: 'image/webp' };

/**
 * A multipart file part (already staged in the blob store, measured) registered as a file
 * of the bot through the upload flow's own RPCs: content reuse, possession proof (read
 * back from the staged bytes), or the staged object promoted to the upload's staging key
 * and completed.
 */
async function uploadedFileId(ctx: Ctx, part: StagedFilePart, field: string, photo: boolean): Promise<string> {
  if (!ctx.files) throw ApiError.invalid(field, 'UPLOAD_UNAVAILABLE', 'file uploads are not served here; send a file_id');
  const ext = part.fileName.split('.').pop()?.toLowerCase() ?? '';
  let type = part.contentType;
  if (!type || type === 'application/octet-stream') type = IMAGE_TYPES[ext] ?? (photo ? 'image/jpeg' : 'application/octet-stream');
  const fileName = part.fileName || (photo ? 'photo.jpg' : 'document');
  const creds = await ctx.rpc('CreateUploadCredentials', { file_name: fileName, file_size: part.size, checksum: part.sha256, file_type: type, reuse_existing: true });
  if (creds.possessionRequired) {
    const c = creds.possessionChallenge;
    const hash = crypto.createHash('sha256').update(Buffer.from(c.nonce, 'hex'));
    for (const r of c.ranges) {
      const offset = Number(r.offset);
      const length = Number(r.length);
      if (length > 0) for await (const chunk of ctx.files.blobs.read(part.key, { start: offset, end: offset + length - 1 })) hash.update(chunk as Buffer);
    }
    const proven = await ctx.rpc('ProvePossession', { challenge_id: c.challengeId, proof: hash.digest('hex') });
    return proven.file_id;
  }
  if (!creds.uploadRequired) return creds.file_id;
  const token = String(creds.uploadUrl).split('/api/v1/files/upload/')[1] ?? '';
  const grant = ctx.files.signer.verify(token, 'upload');
  if (!('ok' in grant)) throw new Error('the core handed out an upload URL this gateway cannot verify');
  if (grant.ok.size !== part.size || grant.ok.sha256 !== part.sha256) throw new Error('the core granted an upload of other bytes than the staged ones');
  await ctx.files.blobs.promote(part.key, stagingKey(grant.ok.id));
  const done = await ctx.rpc('CompleteUpload', { checksum: part.sha256 });
  return done.file_id;
}

/** A send method's file parameter: a file_id, or an uploaded file part. */
async function fileParam(ctx: Ctx, field: string, photo: boolean): Promise<unknown> {
  const v = ctx.params[field];
  if (isFile(v)) return uploadedFileId(ctx, v, field, photo);
  if (v === undefined) throw ApiError.invalid(field, 'REQUIRED', 'is required');
  return v;
}

/**
 * allowed_updates as Telegram takes it: the kinds this platform never produces
 * (callback_query, chat_member... — frameworks send their whole list) are accepted and
 * left out, as Telegram ignores kinds it has nothing of; a list of nothing but those
 * is refused, since the bot would wait for updates that never come.
 */
function allowedUpdates(params: Params): Params {
  let v = params.allowed_updates;
  if (v === undefined) return params;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      throw ApiError.invalid('allowed_updates', 'MALFORMED_JSON', 'is not valid JSON');
    }
  }
  if (!Array.isArray(v)) throw ApiError.invalid('allowed_updates', 'INVALID_TYPE', 'must be an array of update types');
  const kinds = v.filter((k) => (UPDATE_KINDS as readonly unknown[]).includes(k));
  if (v.length > 0 && kinds.length === 0) {
    throw ApiError.invalid('allowed_updates', 'INVALID_VALUE', `only ${UPDATE_KINDS.join(', ')} updates are delivered here`);
  }
  return { ...params, allowed_updates: kinds };
}

const SEND = ['chat_id', 'caption', 'reply_to_message_id'];

/** reply_parameters.message_id (the newer spelling) as reply_to_message_id. */
function replyTo(params: Params): Params {
  let rp = params.reply_parameters;
  if (typeof rp === 'string') {
    try {
      rp = JSON.parse(rp);
    } catch {
      throw ApiError.invalid('reply_parameters', 'MALFORMED_JSON', 'is not valid JSON');
    }
  }
  const id = (rp as { message_id?: unknown } | undefined)?.message_id;
  return id !== undefined && params.reply_to_message_id === undefined ? { ...params, reply_to_message_id: id } : params;
}

/** The methods, by lower-case name. */
const METHODS: Record<string, (ctx: Ctx) => Promise<unknown>> = {
  async getme(ctx) {
    const me = await ctx.rpc('GetMe', {});
    return {
      // The numeric id the bot's messages carry in from.id (derived from its opaque id).
      id: botUserId(String(me.id)),
      is_bot: true,
      first_name: me.name,
      username: me.username,
      can_join_groups: Boolean(me.can_join_groups),
      can_read_all_group_messages: false,
      supports_inline_queries: Boolean(me.supports_inline_queries),
    };
  },

  async getupdates(ctx) {
    const p = pick(allowedUpdates(ctx.params), ['offset', 'limit', 'timeout', 'allowed_updates']);
    const offset = p.offset === undefined ? undefined : Number(p.offset);
    if (offset !== undefined && Number.isInteger(offset) && offset < 0) {
      delete p.offset;
      p.tail = -offset;
    } else if (offset === 0) {
      delete p.offset;
    }
    const updates = (await ctx.rpc('GetUpdates', p)) as Wire[];
    return updates.map(tgUpdate);
  },

  async setwebhook(ctx) {
    return ctx.rpc('SetWebhook', pick(allowedUpdates(ctx.params), ['url', 'secret_token', 'allowed_updates', 'max_connections', 'drop_pending_updates']));
  },

  async deletewebhook(ctx) {
    return ctx.rpc('DeleteWebhook', pick(ctx.params, ['drop_pending_updates']));
  },

  async getwebhookinfo(ctx) {
    const w = await ctx.rpc('GetWebhookInfo', {});
    return compact({
      url: w.url ?? '',
      has_custom_certificate: false,
      pending_update_count: num(w.pending_update_count) ?? 0,
      max_connections: w.url ? w.max_connections : undefined,
      allowed_updates: w.url && w.allowed_updates?.length ? w.allowed_updates : undefined,
      last_error_date: num(w.last_error_date),
      last_error_message: w.last_error_message,
    });
  },

  async sendmessage(ctx) {
    return tgMessage(await ctx.rpc('SendMessage', pick(replyTo(ctx.params), ['chat_id', 'text', 'reply_to_message_id'])));
  },

  async sendphoto(ctx) {
    const fileId = await fileParam(ctx, 'photo', true);
    return tgMessage(await ctx.rpc('SendPhoto', { ...pick(replyTo(ctx.params), SEND), file_id: fileId }));
  },

  async senddocument(ctx) {
    const fileId = await fileParam(ctx, 'document', false);
    return tgMessage(await ctx.rpc('SendDocument', { ...pick(replyTo(ctx.params), SEND), file_id: fileId }));
  },

  async getfile(ctx) {
    const f = await ctx.rpc('GetFile', pick(ctx.params, ['file_id']));
    // file_path is the file_id: /file/bot<token>/<file_id> downloads it.
    return compact({ file_id: f.file_id, file_unique_id: f.file_unique_id, file_size: num(f.file_size), file_path: f.file_id });
  },

  // Nothing to log out of or close here (there is no other API server); the token is checked.
  async logout(ctx) {
    await ctx.rpc('GetMe', {});
    return true;
  },
  async close(ctx) {
    await ctx.rpc('GetMe', {});
    return true;
  },

  async setmycommands(ctx) {
    return ctx.rpc('SetMyCommands', pick(ctx.params, ['commands']));
  },
  async getmycommands(ctx) {
    return ctx.rpc('GetMyCommands', {});
  },
  async deletemycommands(ctx) {
    return ctx.rpc('DeleteMyCommands', {});
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

export function registerTelegramRoutes(app: FastifyInstance, opts: TelegramRoutesOptions): void {
  const { codec } = opts;
  const specs = new Map<string, RouteSpec>();
  for (const r of opts.table.routes) {
    if (r.rpc.startsWith('botplatform.v1.RuntimeService/') && r.method === 'POST') specs.set(r.rpc.split('/')[1]!, r);
  }

  /** The RPC's request message from Telegram parameters (text, JSON values); unknown ones are ignored, as Telegram does. */
  function bind(spec: RouteSpec, params: Params): Obj {
    const type = spec.requestType;
    const fields = codec.lookup(type);
    const message = codec.emptyMessage(type);
    const json: Obj = {};
    for (const [name, value] of Object.entries(params)) {
      const f = fields.get(name);
      if (!f || value === undefined || isFile(value)) continue;
      if (typeof value === 'string' && (f.repeated || f.type.kind === 'message')) {
        try {
          json[name] = JSON.parse(value);
        } catch {
          throw ApiError.invalid(name, 'MALFORMED_JSON', 'is not valid JSON');
        }
      } else if (typeof value === 'string') {
        codec.setFromText(type, message, [f.proto], [value], name);
      } else {
        json[name] = value;
      }
    }
    return codec.decodeMessage(type, json, '', message);
  }

  const config = { surface: 'runtime' as const };
  /** Blob keys a request's multipart file parts were staged under. */
  const staged = new WeakMap<object, string[]>();

  // SHA-256 of a token → its bot's user id, learnt from one GetMe: a token's bot never
  // changes (a revoked token still fails its own call).
  const userIds = new Map<string, number>();
  /** A Telegram-form token's id must be its bot's user id (else 401, as any bad token). */
  async function checkClaimedId(token: string, claimedId: string | undefined, getMe: () => Promise<Wire>): Promise<void> {
    if (claimedId === undefined) return;
    const key = crypto.createHash('sha256').update(token).digest('hex');
    let id = userIds.get(key);
    if (id === undefined) {
      id = botUserId(String((await getMe()).id));
      if (userIds.size >= MAX_VERIFIED) userIds.clear();
      userIds.set(key, id);
    }
    if (String(id) !== claimedId) throw ApiError.unauthenticated('invalid bot token');
  }

  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
      const text = (body as string).trim();
      if (text === '') return done(null, undefined);
      try {
        done(null, JSON.parse(text));
      } catch {
        done(ApiError.invalid('body', 'MALFORMED_JSON', 'is not valid JSON'), undefined);
      }
    });
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    });
    // Multipart bodies stream: text parts within MAX_BODY_BYTES, file parts into the blob
    // store within MAX_FILE_BYTES (telegram-multipart.ts). Staged parts are removed once
    // the request is answered (or abandoned).
    const limits = { maxTextBytes: opts.maxBodyBytes, maxFileBytes: opts.maxFileBytes };
    scope.addHook('preParsing', async (request, _reply, payload) => {
      const declared = Number(request.headers['content-length']);
      const multipart = /^multipart\/form-data\b/i.test(String(request.headers['content-type'] ?? ''));
      if (multipart && declared > limits.maxTextBytes + limits.maxFileBytes) throw tooLarge('the request body');
      return payload;
    });
    scope.addContentTypeParser('multipart/form-data', async (request: FastifyRequest, payload: NodeJS.ReadableStream) => {
      const keys: string[] = [];
      staged.set(request.raw, keys);
      return parseMultipartStream(payload as AsyncIterable<Buffer>, String(request.headers['content-type']), opts.files?.blobs, limits, keys);
    });
    const unstage = async (request: FastifyRequest) => {
      const keys = staged.get(request.raw);
      staged.delete(request.raw);
      if (keys && opts.files) await Promise.all(keys.map((k) => opts.files!.blobs.delete(k).catch(() => {})));
    };
    scope.addHook('onResponse', unstage);
    scope.addHook('onRequestAbort', unstage);
    // A refused oversize body is not read to its end: the connection closes after the answer.
    scope.addHook('onSend', async (_request, reply, payload) => {
      if (reply.statusCode === 413) reply.header('connection', 'close');
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
        const method = METHODS[tail.toLowerCase()];
        if (!method || tail.includes('/')) throw routeNotFound('runtime', request.method);
        const body = request.body;
        if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body))) {
          throw ApiError.invalid('body', 'INVALID_TYPE', 'must be a JSON object');
        }
        const params: Params = { ...(request.query as Params), ...(body as Params | undefined) };
        const metadata = { authorization: `Bearer ${token}`, [SURFACE_METADATA]: 'telegram' };
        const ctx: Ctx = {
          params,
          files: opts.files,
          rpc: (name, p) => {
            const spec = specs.get(name)!;
            return opts.call(spec, bind(spec, p), metadata, request, reply) as Promise<Wire>;
          },
        };
        await checkClaimedId(token, claimedId, () => ctx.rpc('GetMe', {}));
        const result = await method(ctx);
        return reply.code(200).type('application/json').send({ ok: true, result: result ?? null });
      },
    });

    scope.get('/file/bot*', { config }, async (request, reply) => {
      const { token, tail, claimedId } = splitPath((request.params as { '*': string })['*']);
      if (!tail) throw routeNotFound('runtime', request.method);
      if (!opts.files) throw ApiError.notFound('file');
      const metadata = { authorization: `Bearer ${token}`, [SURFACE_METADATA]: 'telegram' };
      const rpc = (name: string, p: Params) => {
        const spec = specs.get(name)!;
        return opts.call(spec, bind(spec, p), metadata, request, reply) as Promise<Wire>;
      };
      await checkClaimedId(token, claimedId, () => rpc('GetMe', {}));
      const file = await rpc('GetFile', { file_id: tail });
      const grant = String(file.download_url ?? '').split('/api/v1/files/download/')[1];
      if (!grant) throw ApiError.notFound('file');
      return sendDownload(opts.files, grant, reply);
    });
  });
}
