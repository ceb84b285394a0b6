/** The bus's topics: named here, in the bus layer, and nowhere else. */

/**
 * Polling bots with newly stored updates (key: bot id; one message per bot per ingest):
 * wakes their long polls. Its value is NO_DELIVERY (the ingest wrote no delivery for the
 * bot: the polls read the updates from the database), or, published by the committing
 * core itself, the updates as stored (a JSON array: update-waiters.ts's encodeArrived),
 * which a poll waiting for exactly those answers without a read. Every core's fan-out
 * consumer reads it; the webhook dispatchers do not (a webhook bot's go to
 * WEBHOOK_UPDATES_TOPIC). Cores from before that topic also sent webhook bots' here, with an
 * empty value.
 */
export const UPDATES_TOPIC = 'botplatform.updates';
/**
 * The value of an UPDATES_TOPIC message: its updates got no delivery (dispatchers from
 * before WEBHOOK_UPDATES_TOPIC read this topic and skip such messages).
 */
export const NO_DELIVERY = 'polling';
/**
 * Bots in webhook mode with newly stored updates and their deliveries (key: bot id, value
 * empty; one message per bot per ingest): read by the webhook dispatchers' group alone, which
 * reads the due deliveries from the database. No long poll waits on a webhook bot.
 */
export const WEBHOOK_UPDATES_TOPIC = 'botplatform.updates.webhook';
/** Every message a bot sent (key: bot id): for the platform's messaging services. */
export const MESSAGES_TOPIC = 'botplatform.messages';
/** Control signals between core instances (poll takeover, mode changes). */
export const CONTROL_TOPIC = 'botplatform.control';
