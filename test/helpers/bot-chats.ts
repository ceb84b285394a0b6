/**
 * A bot with chats, as the message-method tests use it: the native runtime API, the
 * Telegram surface and gRPC as the bot; internal ingest as a messaging service bringing
 * messages in (any chat, type, names and date); a file registered through the upload
 * flow; a PNG header of a given size.
 */
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import { InternalServiceClient, IngestUpdatesRequest, type IngestUpdatesResponse } from '../../src/gen/botplatform/v1/internal_service.js';
import { RuntimeServiceClient } from '../../src/gen/botplatform/v1/runtime_service.js';
import { call, client, TEST_INTERNAL_TOKEN, type Harness, type HttpResult } from './harness.js';

export function botChats(h: Harness, ownerJwt: string) {
  const owner = client(h.url, ownerJwt);
  const creds = grpc.credentials.createInsecure();
  const internal = new InternalServiceClient(h.grpcAddress, creds);
  const runtime = new RuntimeServiceClient(h.grpcAddress, creds);

  const helpers = {
    runtime,
    /** A native runtime call: /api/v1/bots/<method>. */
    rt: (token: string, method: string, body: object): Promise<HttpResult> => call(h.url, 'POST', `/api/v1/bots/${method}`, { token, body }),
    /** A Telegram-surface call: /bot<token>/<method>, JSON. */
    tg: (token: string, method: string, body: object = {}): Promise<HttpResult> => call(h.url, 'POST', `/bot${token}/${method}`, { body }),
    /** A runtime RPC over gRPC as the bot: its response, or the ServiceError it failed with. */
    grpc<Res>(token: string, method: keyof RuntimeServiceClient, req: unknown): Promise<Res> {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${token}`);
      const fn = runtime[method] as unknown as (req: unknown, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown;
      return new Promise((resolve, reject) => fn.call(runtime, req, md, (err, res) => (err ? reject(err) : resolve(res))));
    },
    /**
     * A message a user writes to the bot, brought in by a messaging service: message
     * `messageId` of the chat (a private chat with user `chat` unless `chat` is an object),
     * with `extra` (text, date, photo...); answers its message_id.
     */
    async say(botId: string, chat: number | { id: number; type: string; title?: string; username?: string; firstName?: string; lastName?: string },
      messageId: number, extra: object = {}): Promise<number> {
      const c = typeof chat === 'number' ? { id: chat, type: 'private', firstName: 'Carol', username: 'carol' } : chat;
      const from = { id: c.type === 'private' ? c.id : 4242, isBot: false, username: 'carol', firstName: 'Carol' };
      const r = await helpers.ingest([{ botId, message: { messageId, chat: c, from, text: 'hi', ...extra } }]);
      if (!r.results[0]?.updateId) throw new Error(JSON.stringify(r));
      return messageId;
    },
    /** Messages brought in by a messaging service (InternalService.IngestUpdates). */
    ingest(updates: object[]): Promise<IngestUpdatesResponse> {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
      return new Promise((resolve, reject) =>
        internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates }), md, (err, res) => (err ? reject(err) : resolve(res))));
    },
    /** Registers `bytes` as a file of the bot through the whole upload flow; answers its file_id. */
    async registerFile(token: string, bytes: Buffer, fileName: string, fileType: string): Promise<string> {
      const checksum = crypto.createHash('sha256').update(bytes).digest('hex');
      const cred = await helpers.rt(token, 'files/upload-credentials', { fileName, fileSize: bytes.length, fileType, checksum });
      const r = cred.body.result;
      if (r.uploadRequired) {
        const put = await fetch(r.uploadUrl, { method: 'PUT', headers: r.headers, body: new Uint8Array(bytes) });
        if (put.status !== 200) throw new Error(`upload: ${put.status}`);
        const done = await helpers.rt(token, 'files/complete', { checksum });
        if (done.status !== 200) throw new Error(JSON.stringify(done.body));
        return done.body.result.file_id;
      }
      return r.file_id ?? r.fileId;
    },
    close() {
      internal.close();
      runtime.close();
    },
  };
  return helpers;
}

/** A PNG of width × height (one grey row repeated; valid, small), with `salt` in a text chunk so each is new content. */
export function png(width: number, height: number, salt = crypto.randomBytes(8).toString('hex')): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 0; // greyscale
  const raw = Buffer.concat(Array.from({ length: height }, () => Buffer.concat([Buffer.from([0]), Buffer.alloc(width, 128)])));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('tEXt', Buffer.from(`salt\0${salt}`, 'latin1')),
    chunk('IDAT', zlib.deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
