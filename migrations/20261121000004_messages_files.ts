import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * Messages and files. Chats a bot may write to (every chat that has written to it),
 * the per-bot message id counter, messages in both directions (outbound with their
 * body; inbound ids only, so replies can be checked), and files: content-addressed
 * blobs, the accounts that have proved they hold each blob, logical files (one per
 * registration, many per blob), upload sessions and possession challenges.
 */
export async function up(knex: Knex): Promise<void> {
  const utf8 = (t: Knex.CreateTableBuilder) => {
    if (mysql(knex)) t.charset('utf8mb4');
  };
  /** What a registration asks for: uploads and possession challenges both keep it until a file exists. */
  const fileSpec = (t: Knex.CreateTableBuilder) => {
    t.string('bot_id', 32).notNullable();
    t.string('account_id', 191).notNullable();
    t.string('checksum', 64).notNullable();
    t.bigInteger('size').notNullable();
    t.string('file_name', 255).notNullable();
    t.string('mime_type', 127).notNullable();
    t.string('reuse_request_id', 128);
  };
  await knex.schema.alterTable('bots', (t) => {
    t.bigInteger('last_message_id').notNullable().defaultTo(0);
  });

  await knex.schema.createTable('chats', (t) => {
    utf8(t);
    t.string('bot_id', 32).notNullable();
    t.bigInteger('chat_id').notNullable();
    t.string('type', 16).notNullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['bot_id', 'chat_id']);
  });

  await knex.schema.createTable('messages', (t) => {
    utf8(t);
    t.string('bot_id', 32).notNullable();
    t.bigInteger('chat_id').notNullable();
    t.bigInteger('message_id').notNullable();
    t.boolean('outbound').notNullable();
    t.text('payload'); // outbound: the message as on the JSON wire
    t.bigInteger('created_at').notNullable();
    t.primary(['bot_id', 'chat_id', 'message_id']);
  });

  await knex.schema.createTable('blobs', (t) => {
    utf8(t);
    t.string('checksum', 64).primary(); // lowercase hex SHA-256 of the content
    t.bigInteger('size').notNullable();
    t.bigInteger('created_at').notNullable();
  });

  await knex.schema.createTable('blob_owners', (t) => {
    utf8(t);
    t.string('checksum', 64).notNullable();
    t.string('account_id', 191).notNullable();
    t.bigInteger('created_at').notNullable();
    t.primary(['checksum', 'account_id']);
  });

  await knex.schema.createTable('files', (t) => {
    utf8(t);
    t.string('id', 40).primary();
    t.string('bot_id', 32).notNullable();
    t.string('checksum', 64).notNullable();
    t.bigInteger('size').notNullable();
    t.string('file_name', 255).notNullable();
    t.string('mime_type', 127).notNullable();
    t.string('reuse_request_id', 128);
    t.bigInteger('created_at').notNullable();
    t.unique(['bot_id', 'reuse_request_id'], { indexName: 'files_bot_reuse' });
    t.index(['checksum'], 'files_checksum');
  });

  await knex.schema.createTable('uploads', (t) => {
    utf8(t);
    t.string('id', 40).primary();
    fileSpec(t);
    t.string('file_id', 40); // set once completed
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.index(['bot_id', 'checksum'], 'uploads_bot_checksum');
    t.index(['expires_at'], 'uploads_expires');
  });

  await knex.schema.createTable('possession_challenges', (t) => {
    utf8(t);
    t.string('id', 40).primary();
    fileSpec(t);
    t.string('nonce', 64).notNullable();
    t.text('ranges').notNullable(); // JSON [{offset, length}]
    t.boolean('used').notNullable().defaultTo(false);
    t.bigInteger('created_at').notNullable();
    t.bigInteger('expires_at').notNullable();
    t.index(['expires_at'], 'possession_expires');
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['possession_challenges', 'uploads', 'files', 'blob_owners', 'blobs', 'messages', 'chats']) {
    await knex.schema.dropTable(table);
  }
  await knex.schema.alterTable('bots', (t) => t.dropColumn('last_message_id'));
}
