/**
 * This platform's updates and messages in Telegram's Bot API types, for the
 * Telegram-compatible surface: its getUpdates and method results (gateway/runtime/
 * telegram.ts) and the bodies of webhooks set through it (the dispatcher), so a
 * framework's webhook handler reads exactly what its getUpdates would. Telegram names:
 * `update_id` is the bot's update_seq, photos are PhotoSize arrays, absent optional
 * fields are left out. Takes the JSON wire forms (int64 values may be strings).
 */

type Obj = Record<string, unknown>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Wire = any;

const num = (v: unknown) => (v === undefined || v === null ? undefined : Number(v));

/** Drops undefined values (Telegram leaves absent optional fields out). */
export function compact(o: Obj): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

export function tgUser(u: Wire): Obj | undefined {
  if (!u) return undefined;
  return compact({ id: num(u.id), is_bot: Boolean(u.is_bot), first_name: u.first_name ?? u.username ?? '', username: u.username });
}

export function tgMessage(m: Wire): Obj | undefined {
  if (!m) return undefined;
  return compact({
    message_id: num(m.message_id),
    from: tgUser(m.from),
    chat: m.chat ? { id: num(m.chat.id), type: m.chat.type } : undefined,
    date: num(m.date),
    text: m.text,
    caption: m.caption,
    photo: m.photo ? [compact({ file_id: m.photo.file_id, file_unique_id: m.photo.file_unique_id, width: 0, height: 0, file_size: num(m.photo.file_size) })] : undefined,
    document: m.document
      ? compact({ file_id: m.document.file_id, file_unique_id: m.document.file_unique_id, file_name: m.document.file_name, mime_type: m.document.mime_type, file_size: num(m.document.file_size) })
      : undefined,
  });
}

/** A native update (`{update_id, update_seq, message | edited_message}`) as a Telegram Update. */
export function tgUpdate(u: Wire): Obj {
  return compact({ update_id: num(u.update_seq), message: tgMessage(u.message), edited_message: tgMessage(u.edited_message) });
}

/** A stored webhook body (the native update's JSON) as the Telegram Update's JSON. */
export function telegramWebhookBody(payload: string): string {
  return JSON.stringify(tgUpdate(JSON.parse(payload)));
}
