/** The bus's topics: named here, in the bus layer, and nowhere else. */

/**
 * Bots with newly stored updates (key: bot id; one message per bot per ingest): wakes long
 * polls and the webhook dispatchers, which read the updates from the database. Its value
 * is empty when the ingest wrote deliveries for the bot (a bot in webhook mode), or
 * NO_DELIVERY when it wrote none (a polling bot): dispatchers take no such message.
 */
export const UPDATES_TOPIC = 'botplatform.updates';
/**
 * The value of an UPDATES_TOPIC message whose updates got no delivery: nothing for a
 * dispatcher to look for (a writer that does not say, as before this value, sends it empty).
 */
export const NO_DELIVERY = 'polling';
/** Every message a bot sent (key: bot id): for the platform's messaging services. */
export const MESSAGES_TOPIC = 'botplatform.messages';
/** Control signals between core instances (poll takeover, mode changes). */
export const CONTROL_TOPIC = 'botplatform.control';
