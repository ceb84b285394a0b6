/** Structured JSON logs (pino). Credentials are redacted wherever they could appear. */
import pino, { type DestinationStream, type Logger } from 'pino';

export const REDACT_PATHS = [
  'authorization',
  '*.authorization',
  'req.headers.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'metadata.authorization',
  '*.metadata.authorization',
  'token',
  '*.token',
  '*.one_time_token',
  '*.oneTimeToken',
  'secret_token',
  '*.secret_token',
  '*.secretToken',
  '*.secret',
  '*.jwt',
  '*.password',
  '*.internalToken',
  '*.internalApiToken',
];

/** The service's logger; `destination` (tests) receives the JSON lines instead of stdout. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'botplatform' } };
  return destination ? pino(options, destination) : pino(options);
}
