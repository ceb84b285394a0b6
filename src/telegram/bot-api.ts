/**
 * Telegram's Bot API types, a leaf at the edge: this platform's updates and messages in
 * Telegram's shape, for the Telegram-compatible surface: its getUpdates and method
 * results (gateway/runtime/telegram.ts) and the bodies of webhooks set through it (the
 * dispatcher), so a framework's webhook handler reads exactly what its getUpdates would.
 * Telegram names: `update_id` is the bot's update_seq, photos are PhotoSize arrays,
 * absent optional fields are left out. Takes the generated message types (a stored webhook body is read
 * back into them first).
 */
import type { File, Message, Update, User } from '../gen/botplatform/v1/update.js';
import { fromWireMessage } from '../wire.js';

type Obj = Record<string, unknown>;

/** Drops undefined values (Telegram leaves absent optional fields out). */
export function compact(o: Obj): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

export function tgUser(u: User | undefined): Obj | undefined {
  if (!u) return undefined;
  return compact({ id: u.id, is_bot: u.isBot, first_name: u.firstName ?? u.username ?? '', username: u.username });
}

const tgFile = (f: File) => compact({ file_id: f.fileId, file_unique_id: f.fileUniqueId, file_size: f.fileSize });

export function tgMessage(m: Message | undefined): Obj | undefined {
  if (!m) return undefined;
  return compact({
    message_id: m.messageId,
    from: tgUser(m.from),
    chat: m.chat ? { id: m.chat.id, type: m.chat.type } : undefined,
    date: m.date,
    text: m.text,
    caption: m.caption,
    photo: m.photo ? [{ ...tgFile(m.photo), width: 0, height: 0 }] : undefined,
    document: m.document ? compact({ ...tgFile(m.document), file_name: m.document.fileName, mime_type: m.document.mimeType }) : undefined,
  });
}

/** An update as a Telegram Update. */
export function tgUpdate(u: Update): Obj {
  return compact({ update_id: u.updateSeq, message: tgMessage(u.message), edited_message: tgMessage(u.editedMessage) });
}

/** A stored webhook body (the native update's JSON) as the Telegram Update's JSON. */
export function telegramWebhookBody(payload: string): string {
  const u = JSON.parse(payload) as { update_id: number; update_seq: number; message?: unknown; edited_message?: unknown };
  return JSON.stringify(tgUpdate({
    updateId: u.update_id,
    updateSeq: u.update_seq,
    message: u.message ? fromWireMessage(u.message) : undefined,
    editedMessage: u.edited_message ? fromWireMessage(u.edited_message) : undefined,
    callbackQuery: undefined,
    inlineQuery: undefined,
  }));
}
