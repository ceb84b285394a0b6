/**
 * The console's ListChatMessages (messages-repo.ts's listSent) reads a chat's sent
 * messages through an index of their own (migration messages_chat_sent): the page (with
 * its total) and the count of a page past the end read neither the chat's received
 * messages nor, for the count, the table.
 * SQLite's query planner says which index a statement takes.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDb, migrateLatest, type Db } from '../../src/storage/db.js';
import { createMessagesRepo } from '../../src/storage/messages-repo.js';

let db: Db;
beforeAll(async () => {
  db = createDb({ kind: 'sqlite', filename: path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bp-plans-')), 'plans.sqlite') });
  await migrateLatest(db);
});
afterAll(async () => {
  await db?.destroy();
});

/** The plan SQLite makes for a statement built as listSent builds it. */
async function plan(q: { toSQL(): { sql: string; bindings: readonly unknown[] } }): Promise<string> {
  const { sql, bindings } = q.toSQL();
  const rows = await db.sql.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, [...bindings]);
  return rows.map((r) => r.detail).join('; ');
}

it('a page and the count of a chat\'s sent messages take the messages_chat_sent index', async () => {
  const where = () => db.knex('messages').where({ bot_id: 'b', chat_id: 1, outbound: 1 });
  expect(await plan(where().select('payload').orderBy('message_id', 'desc').select(db.knex.raw('COUNT(*) OVER () AS page_total')).limit(20).offset(40)))
    .toMatch(/USING INDEX messages_chat_sent/);
  expect(await plan(where().count({ n: '*' }))).toMatch(/USING COVERING INDEX messages_chat_sent/);
});

it('listSent answers the bot\'s messages of the chat only, newest first, with their count', async () => {
  const messages = createMessagesRepo(db);
  await db.sql.unit(async (w) => {
    messages.insertInbound([1, 3, 5].map((id) => ({ botId: 'b', chatId: 1, messageId: id, at: 0, message: { message_id: id, text: 'in' } })), w);
    const sent = (chatId: number, messageId: number, message: Record<string, unknown>) => ({ botId: 'b', chatId, messageId, json: JSON.stringify(message) });
    messages.insertSent([2, 4, 6, 7].map((id) => sent(1, id, { message_id: id, text: 'out' })), 0, w);
    messages.insertSent([sent(2, 8, { message_id: 8 })], 0, w);
  });
  const page = await messages.listSent('b', 1, 2, 2);
  expect(page).toEqual({ items: [{ message_id: 4, text: 'out' }, { message_id: 2, text: 'out' }], total: 4 });
});
