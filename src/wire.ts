/**
 * Messages as they are stored and sent on the JSON wire (snake_case, as webhook
 * receivers get them) ⇄ the generated message types the core works with. A leaf: the
 * domain, the dispatcher and the Telegram mappers (src/telegram/) all read it.
 */
import crypto from 'node:crypto';
import type { File, Message, Update, User } from './gen/botplatform/v1/update.js';

/** The numeric user id a bot's messages carry in from.id (Telegram's getMe id), derived from its opaque id. */
export function botUserId(botId: string): number {
  const x = parseInt(crypto.createHash('sha256').update(botId).digest('hex').slice(0, 13), 16);
  return 2 ** 52 + x;
}

export type WireMessage = Record<string, unknown>;

function wireUser(u: User): Record<string, unknown> {
  return {
    id: u.id,
    is_bot: u.isBot,
    ...(u.username !== undefined ? { username: u.username } : {}),
    ...(u.firstName !== undefined ? { first_name: u.firstName } : {}),
  };
}

/** A file as it appears in a message (no download URL). */
export function wireFile(f: File): Record<string, unknown> {
  return {
    file_id: f.fileId,
    file_unique_id: f.fileUniqueId,
    file_name: f.fileName,
    file_size: f.fileSize,
    mime_type: f.mimeType,
    checksum: f.checksum,
  };
}

/* eslint-disable-next-line @typescript-eslint/no-explicit-any */
function fromWireFile(w: any): File | undefined {
  if (!w) return undefined;
  return {
    fileId: w.file_id ?? '',
    fileUniqueId: w.file_unique_id ?? '',
    fileName: w.file_name ?? '',
    fileSize: w.file_size ?? 0,
    mimeType: w.mime_type ?? '',
    checksum: w.checksum ?? '',
  };
}

export function toWireMessage(m: Message): WireMessage {
  return {
    message_id: m.messageId,
    date: m.date,
    chat: { id: m.chat?.id ?? 0, type: m.chat?.type ?? 'private' },
    ...(m.from ? { from: wireUser(m.from) } : {}),
    ...(m.text !== undefined ? { text: m.text } : {}),
    ...(m.replyToMessageId !== undefined ? { reply_to_message_id: m.replyToMessageId } : {}),
    ...(m.photo ? { photo: wireFile(m.photo) } : {}),
    ...(m.document ? { document: wireFile(m.document) } : {}),
    ...(m.caption !== undefined ? { caption: m.caption } : {}),
  };
}

/* eslint-disable @typescript-eslint/no-explicit-any */
export function fromWireMessage(w: any): Message {
  return {
    messageId: w.message_id,
    date: w.date,
    chat: { id: w.chat.id, type: w.chat.type },
    from: w.from ? { id: w.from.id, isBot: w.from.is_bot, username: w.from.username, firstName: w.from.first_name } : undefined,
    text: w.text,
    replyToMessageId: w.reply_to_message_id,
    photo: fromWireFile(w.photo),
    document: fromWireFile(w.document),
    caption: w.caption,
  };
}
/* eslint-enable @typescript-eslint/no-explicit-any */

/** A stored update (its kind and wire message) as the generated Update. */
export function toUpdateMessage(u: { updateId: number; updateSeq: number; kind: string; message: Record<string, unknown> }): Update {
  const message = fromWireMessage(u.message);
  return {
    updateId: u.updateId,
    updateSeq: u.updateSeq,
    message: u.kind === 'message' ? message : undefined,
    editedMessage: u.kind === 'edited_message' ? message : undefined,
  };
}


export const UPDATE_KINDS = ['message', 'edited_message'] as const;
