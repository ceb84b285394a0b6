import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/** Partitions of the outbound feed; fixed, since consumers' cursors name them. */
const PARTITIONS = 16;

/**
 * The outbound feed (InternalService.StreamSentMessages): every message a bot sends,
 * in partitions by hash(bot, chat) mod 16.
 *
 * feed_partitions: each partition's last sequence number. A send locks its partition's
 * row while it takes the next one, so within a partition the sequence is gap-free and
 * in commit order: a reader that has seen seq n has seen everything before it.
 * feed_messages: the messages, by (partition, seq), with the same JSON value as the
 * bus topic botplatform.messages.
 * feed_members: the live members (streams) of each consumer group, until expires_at.
 * feed_leases: which member of a group holds a partition, until expires_at (epoch ms).
 * feed_positions: how far a group has handled each partition (the seq last committed).
 */
export async function up(knex: Knex): Promise<void> {
  const charset = (t: Knex.CreateTableBuilder) => {
    if (mysql(knex)) t.charset('utf8mb4');
  };
  await knex.schema.createTable('feed_partitions', (t) => {
    t.integer('partition_no').primary();
    t.bigInteger('last_seq').notNullable().defaultTo(0);
  });
  await knex('feed_partitions').insert(Array.from({ length: PARTITIONS }, (_, p) => ({ partition_no: p, last_seq: 0 })));
  await knex.schema.createTable('feed_messages', (t) => {
    charset(t);
    t.integer('partition_no').notNullable();
    t.bigInteger('seq').notNullable();
    t.string('bot_id', 32).notNullable();
    t.bigInteger('chat_id').notNullable();
    t.text('payload').notNullable();
    t.bigInteger('created_at').notNullable();
    t.primary(['partition_no', 'seq']);
  });
  await knex.schema.createTable('feed_members', (t) => {
    charset(t);
    t.string('group_name', 64).notNullable();
    t.string('member', 64).notNullable();
    t.bigInteger('expires_at').notNullable();
    t.primary(['group_name', 'member']);
  });
  await knex.schema.createTable('feed_leases', (t) => {
    charset(t);
    t.string('group_name', 64).notNullable();
    t.integer('partition_no').notNullable();
    t.string('member', 64).notNullable();
    t.bigInteger('expires_at').notNullable();
    t.primary(['group_name', 'partition_no']);
  });
  await knex.schema.createTable('feed_positions', (t) => {
    charset(t);
    t.string('group_name', 64).notNullable();
    t.integer('partition_no').notNullable();
    t.bigInteger('seq').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.primary(['group_name', 'partition_no']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['feed_positions', 'feed_leases', 'feed_members', 'feed_messages', 'feed_partitions']) await knex.schema.dropTable(table);
}
