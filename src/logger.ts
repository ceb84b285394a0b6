/**
 * Structured JSON logs (pino). Credentials are redacted wherever they could appear: by key
 * (REDACT_PATHS), and inside the text of errors and messages (scrubSecrets).
 */
import pino, { type DestinationStream, type Logger } from 'pino';

/** Keys that hold a credential wherever they appear. */
const SECRET_KEYS = [
  'authorization', 'token', 'one_time_token', 'oneTimeToken', 'telegram_token', 'telegramToken', 'secret_token', 'secretToken', 'secret', 'jwt', 'password',
  'internalToken', 'internalApiToken',
];
/** Where an object logged by this service can carry them: at the top, or in one of these. */
const CARRIERS = ['', 'err.', 'req.', 'request.', 'metadata.', 'headers.', 'body.', 'config.', 'options.'];

/**
 * Explicit paths (no wildcards: a wildcard makes pino walk every logged object on
 * every line, the hot path's request lines included).
 */
export const REDACT_PATHS = [
  ...CARRIERS.flatMap((c) => SECRET_KEYS.map((k) => `${c}${k}`)),
  'req.headers.authorization',
  'request.headers.authorization',
  'err.headers.authorization',
  'err.metadata.authorization',
  'err.config.headers.authorization',
  'err.request.headers.authorization',
  'sasl.password',
];

/**
 * Credentials as they can appear inside text (an error's message or stack, a log message):
 * `Bearer <anything>` (an authorization value, the internal token's included), bot tokens,
 * JWTs, and the token of a Telegram-surface path (`/bot<token>/...`, `/file/bot<token>/...`;
 * native `/bots/...` paths and bot ids, `bot_...`, are left alone). grpc-js, for one,
 * repeats a refused metadata value in its error's message.
 */
const SECRET_TEXT = /(\bbearer)\s+[^\s"'`]+|sbot_[A-Za-z0-9]+|eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*|(\/bot)(?!s(?:[/?#\s"'`]|$)|_)[^/?#\s"'`]+/gi;
/** A cheap first look: text without any of these holds none of the above. */
const MAYBE_SECRET = /bearer|sbot_|eyJ|\/bot/i;

/** `text` with every credential SECRET_TEXT finds replaced. */
export function scrubSecrets(text: string): string {
  if (!MAYBE_SECRET.test(text)) return text;
  return text.replace(SECRET_TEXT, (match, bearer?: string, bot?: string) =>
    bearer ? `${bearer} [redacted]` : bot ? `${bot}[redacted]` : match.startsWith('sbot_') ? 'sbot_[redacted]' : '[redacted JWT]');
}

/**
 * A logged value with every string scrubbed (scrubSecrets) and raw bytes left out (Node's
 * `clientError` carries the request's bytes as `rawPacket`: its path and headers).
 */
function scrubDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubSecrets(value);
  if (typeof value !== 'object' || value === null) return value;
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return `[${value.byteLength} bytes]`;
  if (depth >= 8) return '[nested too deep]';
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return scrubDeep(toJSON.call(value), depth + 1);
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    if (key !== 'rawPacket' && typeof v !== 'function') out[key] = scrubDeep(v, depth + 1);
  }
  return out;
}

/**
 * Errors as pino's standard serializer writes them (type, message and stack with their
 * causes, own properties), then scrubbed: an error's text may repeat a credential it was
 * handed (grpc-js refusing an authorization value quotes it whole).
 */
function errSerializer(err: unknown): unknown {
  return scrubDeep(pino.stdSerializers.err(err as Error));
}

/** A request (Fastify's `req`), without its headers, the path scrubbed. */
function reqSerializer(req: { method?: string; url?: string; id?: unknown } | undefined): unknown {
  if (typeof req !== 'object' || req === null) return req;
  return { method: req.method, url: typeof req.url === 'string' ? scrubSecrets(req.url) : undefined, id: req.id };
}

/**
 * The service's logger; `destination` (tests) receives the JSON lines instead of stdout.
 *
 * On stdout, lines are gathered up to 4 KB and written off the event loop, at the latest
 * 100 ms after they were logged (pino's buffered destination): pino's default writes as
 * soon as the previous write is done, a thread-pool round trip for every line or two
 * under load (3-5% of a getMe's or a sendMessage's CPU, measured side by side). What is
 * buffered is written at exit, a crash's included (pino flushes on exit); a SIGKILL can
 * lose the last 100 ms.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: 'botplatform' },
    // Fastify's own serializers (its `req` writes the raw URL) are replaced by these.
    serializers: { err: errSerializer, req: reqSerializer },
    hooks: {
      // A message may repeat a URL (Fastify's "Reply was already sent ... in the \"<url>\"
      // route" warning) or an error's text: scrubbed like errors.
      logMethod(args, method) {
        for (let i = 0; i < args.length; i++) {
          const a = args[i];
          if (typeof a === 'string') args[i] = scrubSecrets(a);
        }
        return method.apply(this, args);
      },
    },
  };
  if (destination) return pino(options, destination);
  return pino(options, pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 100 }));
}
