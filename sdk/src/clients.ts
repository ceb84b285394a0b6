/**
 * Typed clients of the three HTTP surfaces. Their methods come from the generated
 * bindings (sdk/src/generated/api.ts, regenerated from proto/ by `npm run generate`),
 * so a method or field the service does not have is a type error.
 */
import {
  adminMethods,
  consoleMethods,
  runtimeMethods,
  type AdminMethodTypes,
  type ConsoleMethodTypes,
  type RuntimeMethodTypes,
} from './generated/api.js';
import { buildMethods, type ClientOf, type TransportOptions } from './http.js';

/** Where the service is, and how to reach it. */
export type ClientOptions = Omit<TransportOptions, 'credential'>;

/** The runtime API as a bot uses it: `await bot.getUpdates({ offset, timeout: 30 })`. */
export type BotClient = ClientOf<RuntimeMethodTypes>;
/** The console API of one account. */
export type ConsoleClient = ClientOf<ConsoleMethodTypes>;
/** The admin API (a JWT with the admin role). */
export type AdminClient = ClientOf<AdminMethodTypes>;

const transport = (credential: string, o: ClientOptions): TransportOptions => {
  if (!credential) throw new TypeError('a credential is required');
  return { baseUrl: o.baseUrl, credential, fetch: o.fetch, headers: o.headers };
};

/** A runtime client for the bot with this token (sbot_...). Results are the envelope's `result`. */
export function createBotClient(token: string, options: ClientOptions): BotClient {
  return buildMethods<RuntimeMethodTypes>(transport(token, options), 'runtime', runtimeMethods);
}

/** A console client for the account this JWT names. */
export function createConsoleClient(accountJwt: string, options: ClientOptions): ConsoleClient {
  return buildMethods<ConsoleMethodTypes>(transport(accountJwt, options), 'console', consoleMethods);
}

/** An admin client (review queue); the JWT needs the admin role. */
export function createAdminClient(adminJwt: string, options: ClientOptions): AdminClient {
  return buildMethods<AdminMethodTypes>(transport(adminJwt, options), 'console', adminMethods);
}
