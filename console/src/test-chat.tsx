/**
 * The test tool's chat: the bot's messages in the owner's test chat (ListChatMessages,
 * refreshed while open), with their formatting rendered from entities and their
 * keyboards. Pressing a callback button presses it for real (CreateTestCallbackQuery),
 * so the bot gets a callback_query and its edit shows here; a reply keyboard's button
 * sends its text as a test message. Everything is built as elements: no text from a
 * message is ever parsed as HTML, and links open only http(s) addresses.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type Bot, type InlineKeyboardButton, type Message, type MessageEntity } from './api';
import { ErrorAlert } from './ui';
import './test-chat.css';

/** The chat the console's test messages come from (CreateTestUpdate's default). */
export const TEST_CHAT_ID = 100_000_001;
const REFRESH_MS = 1500;

/** An address safe to open: http(s) only (a url entity may leave the scheme out, as "example.com"). */
export function safeHref(raw: string): string | undefined {
  const candidate = /^[a-z][a-z0-9+.-]*:/i.test(raw) ? raw : `https://${raw}`;
  try {
    const u = new URL(candidate);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}

function Link({ href, children }: { href: string | undefined; children: ComponentChildren }) {
  return href ? <a href={href} target="_blank" rel="noopener noreferrer">{children}</a> : <span class="entity">{children}</span>;
}

/** One entity around its (already rendered) content. */
function wrap(e: MessageEntity, text: string, children: ComponentChildren, key: number) {
  switch (e.type) {
    case 'bold': return <strong key={key}>{children}</strong>;
    case 'italic': return <em key={key}>{children}</em>;
    case 'underline': return <u key={key}>{children}</u>;
    case 'strikethrough': return <s key={key}>{children}</s>;
    case 'spoiler': return <span key={key} class="spoiler" title="Spoiler: hover or focus to read" tabIndex={0}>{children}</span>;
    case 'code': return <code key={key}>{children}</code>;
    case 'pre': return <pre key={key}><code data-language={e.language || undefined}>{children}</code></pre>;
    case 'blockquote':
    case 'expandable_blockquote': return <blockquote key={key}>{children}</blockquote>;
    case 'text_link': return <Link key={key} href={safeHref(e.url ?? '')}>{children}</Link>;
    case 'url': return <Link key={key} href={safeHref(text)}>{children}</Link>;
    case 'email': return <a key={key} href={`mailto:${text}`}>{children}</a>;
    default: return <span key={key} class={`entity e-${e.type.replace(/[^a-z_]/g, '')}`}>{children}</span>;
  }
}

/**
 * The text with its entities as nested elements. Offsets are UTF-16 code units, as
 * JavaScript strings index. Telegram's entities nest; one that crosses another's end is
 * cut there.
 */
export function renderEntities(text: string, entities: MessageEntity[], from = 0, to = text.length): ComponentChildren[] {
  const sorted = entities
    .filter((e) => e.length > 0 && e.offset >= from && e.offset < to)
    .sort((a, b) => a.offset - b.offset || b.length - a.length);
  const out: ComponentChildren[] = [];
  let pos = from;
  let i = 0;
  while (i < sorted.length) {
    const e = sorted[i]!;
    if (e.offset < pos) { i++; continue; }
    if (e.offset > pos) out.push(text.slice(pos, e.offset));
    const end = Math.min(e.offset + e.length, to);
    let j = i + 1;
    while (j < sorted.length && sorted[j]!.offset < end) j++;
    const inner = sorted.slice(i + 1, j).map((x) => ({ ...x, length: Math.min(x.length, end - x.offset) }));
    out.push(wrap(e, text.slice(e.offset, end), renderEntities(text, inner, e.offset, end), e.offset));
    pos = end;
    i = j;
  }
  if (pos < to) out.push(text.slice(pos, to));
  return out;
}

/** What a non-callback button does here, in words, for its title. */
const otherKind = (b: InlineKeyboardButton) =>
  b.switch_inline_query !== undefined || b.switch_inline_query_current_chat !== undefined ? 'starts an inline query (not in the test tool)'
    : b.web_app ? 'opens a web app (not in the test tool)'
      : 'not available in the test tool';

function InlineKeyboard({ message, onPress, busy }: { message: Message; onPress: (m: Message, b: InlineKeyboardButton) => void; busy: string | undefined }) {
  const rows = message.reply_markup?.inline_keyboard ?? [];
  if (rows.length === 0) return null;
  return (
    <div class="keyboard" role="group" aria-label={`Buttons of message ${message.message_id}`}>
      {rows.map((row, r) => (
        <div class="kb-row" key={r}>
          {row.buttons.map((b, c) => {
            if (b.url) {
              const href = safeHref(b.url);
              return href
                ? <a key={c} class="button kb" href={href} target="_blank" rel="noopener noreferrer">{b.text} <span aria-hidden="true">↗</span><span class="sr-only"> (opens a link)</span></a>
                : <button key={c} type="button" class="kb" disabled title="a link the console does not open">{b.text}</button>;
            }
            if (b.callback_data !== undefined) {
              const pressing = busy === `${message.message_id}/${b.callback_data}`;
              return <button key={c} type="button" class="kb" aria-busy={pressing ? 'true' : undefined} onClick={() => onPress(message, b)}>{b.text}</button>;
            }
            if (b.copy_text) {
              return <button key={c} type="button" class="kb" onClick={() => void navigator.clipboard?.writeText(b.copy_text!.text).catch(() => {})}>{b.text}</button>;
            }
            return <button key={c} type="button" class="kb" disabled title={otherKind(b)}>{b.text}</button>;
          })}
        </div>
      ))}
    </div>
  );
}

function ReplyKeyboard({ message, onSend }: { message: Message; onSend: (text: string) => void }) {
  const rows = message.reply_markup?.keyboard ?? [];
  if (rows.length === 0) return null;
  return (
    <div class="keyboard reply-kb" role="group" aria-label={`Reply keyboard of message ${message.message_id}`}>
      {rows.map((row, r) => (
        <div class="kb-row" key={r}>
          {row.buttons.map((b, c) => <button key={c} type="button" class="kb" onClick={() => onSend(b.text)}>{b.text}</button>)}
        </div>
      ))}
    </div>
  );
}

function Bubble({ message, children }: { message: Message; children: ComponentChildren }) {
  const text = message.text ?? message.caption;
  const entities = message.text !== undefined ? message.entities : message.caption_entities;
  const file = message.photo ?? message.document;
  return (
    <li class="bubble" data-message={message.message_id}>
      {file && <p class="muted file">{message.photo ? 'Photo' : 'Document'}: {file.file_name}</p>}
      {text !== undefined && <div class="body">{renderEntities(text, entities ?? [])}</div>}
      {children}
      <p class="meta muted">
        #{message.message_id} · {new Date(message.date * 1000).toLocaleTimeString()}
        {message.edit_date !== undefined && <> · <span class="edited">edited</span></>}
      </p>
    </li>
  );
}

/** The bot's side of the test chat, with its keyboards to press. */
export function TestChat({ bot, refreshKey }: { bot: Bot; refreshKey: number }) {
  const [messages, setMessages] = useState<Message[]>();
  const [error, setError] = useState<unknown>();
  const [note, setNote] = useState<string>();
  const [busy, setBusy] = useState<string>();
  const alive = useRef(true);
  const load = () =>
    api.chatMessages(bot.id, TEST_CHAT_ID, 1, 20).then((r) => {
      if (!alive.current) return;
      setMessages([...r.items].reverse());
      setError(undefined);
    }, (err) => alive.current && setError(err));
  useEffect(() => {
    alive.current = true;
    void load();
    const t = setInterval(load, REFRESH_MS);
    return () => {
      alive.current = false;
      clearInterval(t);
    };
  }, [bot.id, refreshKey]);

  const press = async (m: Message, b: InlineKeyboardButton) => {
    setError(undefined);
    setNote(undefined);
    setBusy(`${m.message_id}/${b.callback_data}`);
    try {
      await api.pressButton(bot.id, { chat_id: TEST_CHAT_ID, message_id: m.message_id, callback_data: b.callback_data! });
      setNote(`Pressed “${b.text}” on message ${m.message_id}: the bot got a callback query.`);
      void load();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(undefined);
    }
  };
  const send = async (text: string) => {
    setError(undefined);
    try {
      await api.testUpdate(bot.id, text);
      setNote(`Sent “${text}” as a test message.`);
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section aria-labelledby="chat-title" class="test-chat">
      <h2 id="chat-title">The bot’s replies</h2>
      <p class="muted">Messages the bot sent to the test chat ({TEST_CHAT_ID}), as they are now: edits show, deleted ones go. Press a button as a user would.</p>
      <ErrorAlert error={error} />
      {note && <p class="muted" role="status">{note}</p>}
      {messages && messages.length === 0 && <p class="muted">No messages from the bot in this chat yet.</p>}
      {messages && messages.length > 0 && (
        <ol class="chat" aria-label="Messages from the bot, oldest first">
          {messages.map((m) => (
            <Bubble key={m.message_id} message={m}>
              <InlineKeyboard message={m} onPress={press} busy={busy} />
              <ReplyKeyboard message={m} onSend={send} />
            </Bubble>
          ))}
        </ol>
      )}
    </section>
  );
}
