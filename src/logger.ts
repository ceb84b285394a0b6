/**
 * Structured JSON logs (pino). Credentials are redacted wherever they could appear: by key
 * (REDACT_PATHS), and inside the text of errors and messages (scrubSecrets).
 */
import fs from 'node:fs';
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

/** Gathered lines are written once they fill a chunk of this many bytes. */
const CHUNK_BYTES = 64 * 1024;
/** A line gathered is written at the latest this long after it was logged (ms). */
const LINGER_MS = 100;
/** A destination that cannot take more now (a full pipe) is tried again after this long (ms). */
const BUSY_RETRY_MS = 20;

const isBusy = (err: unknown) => ['EAGAIN', 'EWOULDBLOCK', 'EBUSY'].includes((err as NodeJS.ErrnoException).code ?? '');

/**
 * Log lines to stdout, gathered in memory (as UTF-8) and written 64 KB at a time, at the
 * latest LINGER_MS after the first line of a chunk, and at exit (a crash's included).
 *
 * The writes are made on the event loop's thread, and never wait: stdout is put in
 * non-blocking mode (as Node does whenever `process.stdout` is used), so a pipe that is
 * full answers at once with what it took (or EAGAIN), and the rest is tried again
 * BUSY_RETRY_MS later, while lines go on gathering. Files and /dev/null take the chunk
 * at once. Why not pino's buffered destination (sonic-boom, asynchronous): each of its
 * writes is a thread-pool round trip, about 0.1 ms of the event loop's time on this
 * machine whatever its size, and it writes every 4 KB (its text mode measures the
 * gathered string's byte length on every line, so a larger minimum costs more per line):
 * about a tenth of a getMe's CPU went to its writes (profiled, bench:gateway). And its
 * synchronous mode would block on a full pipe. A destination that stays full keeps the
 * lines in memory until it takes them (as sonic-boom does); a closed one (EPIPE) drops them.
 */
export class GatheringDestination implements DestinationStream {
  /**
   * The chunk being filled: each line is encoded into it as it is logged, so the line's
   * string is garbage at once (kept as strings until the chunk is written, a busy
   * service's lines lived through young-generation GCs and were promoted).
   */
  private chunk: Buffer = Buffer.allocUnsafeSlow(CHUNK_BYTES);
  private used = 0;
  /** Filled chunks not yet taken by the destination, oldest first (the first may be partly written). */
  private readonly full: Buffer[] = [];
  /** A written chunk's memory, kept for the next one. */
  private spare: Buffer | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly waiting: (() => void)[] = [];
  private closed = false;

  constructor(private readonly fd: number) {
    // Node makes a pipe or socket on stdout non-blocking when process.stdout is first used.
    if (fd === 1) void process.stdout;
    process.on('exit', () => this.flushSync());
  }

  write(line: string): boolean {
    if (this.closed) return true;
    const room = this.chunk.length - this.used;
    // A line's UTF-8 takes at most three bytes per UTF-16 unit: measured only when that may not fit.
    if (line.length * 3 > room) {
      const need = Buffer.byteLength(line);
      if (need > room) {
        // The chunk is full: written now, unless earlier ones still wait for the destination.
        if (this.full.length === 0) this.writeOut();
        else this.seal();
        if (need > this.chunk.length) this.chunk = Buffer.allocUnsafeSlow(need);
      }
    }
    this.used += this.chunk.write(line, this.used);
    this.timer ??= setTimeout(() => this.writeOut(), LINGER_MS).unref();
    return true;
  }

  /** Calls `cb` once everything logged so far is written. */
  flush(cb: (err?: Error) => void = () => {}): void {
    this.waiting.push(cb);
    this.writeOut();
  }

  /** Writes everything gathered now, waiting for a full destination (at exit). */
  flushSync(): void {
    for (let waits = 0; !this.writeOut() && waits < 250; waits++) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, BUSY_RETRY_MS);
  }

  /** The chunk being filled joins the ones to write, and a new one (the spare's memory) is started. */
  private seal(): void {
    if (this.used === 0) return;
    this.full.push(this.chunk.subarray(0, this.used));
    this.chunk = this.spare ?? Buffer.allocUnsafeSlow(CHUNK_BYTES);
    this.spare = null;
    this.used = 0;
  }

  /** Writes what is pending and what is gathered, as far as the destination takes it: whether all of it went. */
  private writeOut(): boolean {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (!this.closed) this.seal();
    while (this.full.length > 0 && !this.closed) {
      const next = this.full[0]!;
      try {
        const written = fs.writeSync(this.fd, next);
        if (written < next.length) {
          this.full[0] = next.subarray(written);
          continue;
        }
        this.full.shift();
        // A whole chunk's memory (not a larger line's) is used again.
        if (next.buffer.byteLength === CHUNK_BYTES && this.spare === null) this.spare = Buffer.from(next.buffer, 0, CHUNK_BYTES);
      } catch (err) {
        if (!isBusy(err)) {
          // Nowhere to write to (stdout closed): nothing more is kept.
          this.closed = true;
          this.full.length = 0;
          this.used = 0;
          break;
        }
        this.timer = setTimeout(() => this.writeOut(), BUSY_RETRY_MS).unref();
        return false;
      }
    }
    for (const cb of this.waiting.splice(0)) cb();
    return true;
  }
}

const { lsCacheSym, timeSym, chindingsSym, streamSym } = pino.symbols;
/** Keys redacted at the top of a logged object (REDACT_PATHS' first carrier). */
const TOP_SECRET_KEYS = new Set(SECRET_KEYS);

/**
 * One `info` line of flat fields (strings, numbers, booleans), the same line pino writes
 * (its level, time and the logger's bindings first, then the fields in their order, then
 * `msg`), with the fields serialized by one JSON.stringify: the request lines (one per
 * call) are the hot path's, and pino's field-by-field string building was a tenth of the
 * bytes a getMe allocates (sampled, bench:gateway). A field that would be redacted, or a
 * value that is an object, takes pino's own path.
 */
export function infoLine(logger: Logger, fields: Record<string, unknown>, msg: string): void {
  if (!logger.isLevelEnabled('info')) return;
  for (const key in fields) {
    const value = fields[key];
    if (TOP_SECRET_KEYS.has(key) || (typeof value === 'object' && value !== null)) {
      logger.info(fields, msg);
      return;
    }
  }
  const body = JSON.stringify(fields);
  // What pino itself reads to write a line (its exported symbols, `pino.symbols`).
  const l = logger as unknown as Record<symbol, unknown>;
  const head = (l[lsCacheSym] as Record<number, string>)[logger.levels.values.info!]! + (l[timeSym] as () => string).call(l) + (l[chindingsSym] as string);
  (l[streamSym] as DestinationStream).write(
    `${head}${body.length > 2 ? `,${body.slice(1, -1)}` : ''},"msg":${JSON.stringify(scrubSecrets(msg))}}\n`);
}

/**
 * The service's logger; `destination` (tests) receives the JSON lines instead of stdout.
 *
 * On stdout, lines are gathered up to 64 KB and written without waiting, at the latest
 * 100 ms after they were logged (GatheringDestination). What is gathered is written at
 * exit, a crash's included; a SIGKILL can lose the last 100 ms.
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
  return pino(options, destination ?? new GatheringDestination(1));
}
