/** The bus's topics: named here, in the bus layer, and nowhere else. */

/**
 * Bots with newly stored updates (key: bot id; value empty, one message per bot per
 * ingest): wakes long polls and the webhook dispatchers, which read the updates from the
 * database.
 */
export const UPDATES_TOPIC = 'botplatform.updates';
/** Every message a bot sent (key: bot id): for the platform's messaging services. */
export const MESSAGES_TOPIC = 'botplatform.messages';
/** Control signals between core instances (poll takeover, mode changes). */
export const CONTROL_TOPIC = 'botplatform.control';
