import type { Knex } from 'knex';

/**
 * Issue 33: getChat answers what the platform knows of a chat, so a chat keeps the names
 * its messages came with (a group's title, the other party's username, first and last
 * name in a private chat); and a file that is an image keeps its width and height, read
 * from its header when it is registered (a photo's PhotoSize). All nullable: chats
 * recorded and files registered before this have none.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('chats', (t) => {
    t.string('title', 128);
    t.string('username', 64);
    t.string('first_name', 64);
    t.string('last_name', 64);
  });
  await knex.schema.alterTable('files', (t) => {
    t.integer('width');
    t.integer('height');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('files', (t) => {
    t.dropColumn('width');
    t.dropColumn('height');
  });
  await knex.schema.alterTable('chats', (t) => {
    for (const c of ['title', 'username', 'first_name', 'last_name']) t.dropColumn(c);
  });
}
