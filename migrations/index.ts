/**
 * The migration list, in order. Knex reads migrations through this source rather
 * than by scanning a folder, so the same list works under tsx, vitest and a build.
 */
import type { Knex } from 'knex';
import * as bots from './20261121000001_bots.js';
import * as updates from './20261121000002_updates.js';
import * as deliveries from './20261121000003_deliveries.js';
import * as messagesFiles from './20261121000004_messages_files.js';
import * as limitsAndStats from './20261121000005_limits_and_stats.js';
import * as possessionTries from './20261122000100_possession_tries.js';
import * as accountIdsExact from './20261123000001_account_ids_exact.js';
import * as outboxClaimsIngestKeys from './20261201000001_outbox_claims_ingest_keys.js';
import * as webhookHealthRate from './20261210000001_webhook_health_rate.js';
import * as webhookSecretHeader from './20261211000001_webhook_secret_header.js';
import * as outboundFeed from './20261224000001_outbound_feed.js';
import * as feedPositionsWithinHeads from './20261227000001_feed_positions_within_heads.js';
import * as webhookSecretRotation from './20261228000001_webhook_secret_rotation.js';
import * as queries from './20261228000002_queries.js';
import * as chatNamesImageSizes from './20261228000300_chat_names_image_sizes.js';
import * as deliveryAttempts from './20261228000400_delivery_attempts.js';
import * as attemptTrigger from './20261228000500_attempt_trigger.js';
import * as deletedBots from './20261228000600_deleted_bots.js';
import * as messagesChatSent from './20261228000700_messages_chat_sent.js';
import * as blobSweep from './20261228000800_blob_sweep.js';

const migrations: Record<string, Knex.Migration> = {
  '20261121000001_bots': bots,
  '20261121000002_updates': updates,
  '20261121000003_deliveries': deliveries,
  '20261121000004_messages_files': messagesFiles,
  '20261121000005_limits_and_stats': limitsAndStats,
  '20261122000100_possession_tries': possessionTries,
  '20261123000001_account_ids_exact': accountIdsExact,
  '20261201000001_outbox_claims_ingest_keys': outboxClaimsIngestKeys,
  '20261210000001_webhook_health_rate': webhookHealthRate,
  '20261211000001_webhook_secret_header': webhookSecretHeader,
  '20261224000001_outbound_feed': outboundFeed,
  '20261227000001_feed_positions_within_heads': feedPositionsWithinHeads,
  '20261228000001_webhook_secret_rotation': webhookSecretRotation,
  '20261228000002_queries': queries,
  '20261228000300_chat_names_image_sizes': chatNamesImageSizes,
  '20261228000400_delivery_attempts': deliveryAttempts,
  '20261228000500_attempt_trigger': attemptTrigger,
  '20261228000600_deleted_bots': deletedBots,
  '20261228000700_messages_chat_sent': messagesChatSent,
  '20261228000800_blob_sweep': blobSweep,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(migrations),
  getMigrationName: (name) => name,
  getMigration: async (name) => migrations[name]!,
};
