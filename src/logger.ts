/** Structured JSON logs (pino). Credentials are redacted wherever they could appear. */
import pino, { type Logger } from 'pino';

export const REDACT_PATHS = [
  'authorization',
  '*.authorization',
  'req.headers.authorization',
  'headers.authorization',
  'metadata.authorization',
  '*.token',
  '*.one_time_token',
  '*.oneTimeToken',
  '*.secret_token',
  '*.secretToken',
  '*.jwt',
];

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'botplatform' } });
}
