import type { Knex } from 'knex';

/**
 * Issue 31: CommitSentMessages used to record any seq, even one past everything its
 * partition held, and a position never goes back: a group given one received none of
 * that partition's messages again. Such commits are refused now; this brings the ones
 * already recorded back to their partition's last message, so the group receives what
 * is sent from now on (what was sent while it was silenced is not sent again).
 */
export async function up(knex: Knex): Promise<void> {
  const head = '(SELECT p.last_seq FROM feed_partitions p WHERE p.partition_no = feed_positions.partition_no)';
  await knex.raw(`UPDATE feed_positions SET seq = ${head} WHERE seq > ${head}`);
}

/** Nothing to undo: the positions it changed were past anything sent. */
export async function down(): Promise<void> {}
