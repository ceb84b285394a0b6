/**
 * The service's log lines on stdout (logger.ts's GatheringDestination, what `npm start`
 * writes to): every line arrives whole, once and in order, whether the process ends by
 * exiting, by crashing, or after a flush, and while the reader is slow (a full pipe).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger, infoLine } from '../src/logger.js';

const ROOT = path.resolve(import.meta.dirname, '..');

/** A process that logs `lines` lines on stdout through the service's logger, then ends as `end` says. */
function logging(lines: number, end: 'exit' | 'crash' | 'flush' | 'idle', opts: { pauseReaderMs?: number } = {}) {
  const script = `
    import { createLogger } from './src/logger.js';
    const logger = createLogger('info');
    const pad = 'x'.repeat(200);
    for (let i = 0; i < ${lines}; i++) {
      logger.info({ n: i, pad }, 'line');
      if (i % 1000 === 999) await new Promise((r) => setImmediate(r));
    }
    const end = ${JSON.stringify(end)};
    if (end === 'exit') process.exit(0);
    if (end === 'crash') throw new Error('boom');
    if (end === 'flush') logger.flush(() => { process.stdout.write('FLUSHED\\n'); setTimeout(() => process.exit(0), 50); });
    // 'idle': nothing keeps the process alive; it ends when its loop is empty.
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => (out += d));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  if (opts.pauseReaderMs) {
    child.stdout.pause();
    setTimeout(() => child.stdout.resume(), opts.pauseReaderMs);
  }
  return new Promise<{ code: number | null; out: string; err: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, out, err })));
}

/** The numbers of the `line` lines, each line parsed as JSON (a broken line fails). */
const numbers = (out: string) =>
  out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; n: number }).filter((l) => l.msg === 'line').map((l) => l.n);

const upTo = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('log lines on stdout', () => {
  it('are all written, whole and in order, when the process exits', async () => {
    const { code, out } = await logging(5000, 'exit');
    expect(code).toBe(0);
    expect(numbers(out)).toEqual(upTo(5000));
  });

  it('are all written when the process crashes, before its error', async () => {
    const { code, out, err } = await logging(3000, 'crash');
    expect(code).not.toBe(0);
    expect(err).toMatch(/boom/);
    expect(numbers(out)).toEqual(upTo(3000));
  });

  it('are all written when the process ends on its own, a few lines included', async () => {
    expect(numbers((await logging(3, 'idle')).out)).toEqual(upTo(3));
    expect(numbers((await logging(4000, 'idle')).out)).toEqual(upTo(4000));
  });

  it('are written before a flush answers', async () => {
    const { out } = await logging(4000, 'flush');
    const [logged, after] = out.split('FLUSHED\n');
    expect(numbers(logged!)).toEqual(upTo(4000));
    expect(after).toBe('');
  });

  it('wait for a reader that is slow to take them (a full pipe), none lost or repeated', async () => {
    const { code, out } = await logging(20_000, 'exit', { pauseReaderMs: 500 });
    expect(code).toBe(0);
    expect(numbers(out)).toEqual(upTo(20_000));
  });
});

describe('request lines (infoLine)', () => {
  /** The lines a logger at `level` writes, parsed, and their text. */
  function capture(level = 'info') {
    const lines: string[] = [];
    const logger = createLogger(level, { write: (s: string) => void lines.push(s) });
    return { logger, lines };
  }

  it('are the line pino writes for the same fields, field for field and in order', () => {
    const { logger, lines } = capture();
    const fields = { requestId: 'r-1', method: 'POST', route: '/api/v1/bots/getMe', status: 200, ms: 0.7, rpc: 'GetMe', quote: 'a "b" \\ c\n', none: undefined, ok: true, nan: NaN };
    logger.info(fields, 'http');
    infoLine(logger, fields, 'http');
    expect(lines).toHaveLength(2);
    const [viaPino, viaLine] = lines.map((l) => l.replace(/"time":\d+/, '"time":0'));
    expect(viaLine).toBe(viaPino);
    expect(JSON.parse(viaLine!)).toMatchObject({ level: 30, service: 'botplatform', requestId: 'r-1', status: 200, quote: 'a "b" \\ c\n', nan: null, msg: 'http' });
  });

  it('redact a credential field as pino does, and write nothing below info', () => {
    const { logger, lines } = capture();
    infoLine(logger, { requestId: 'r-2', token: 'sbot_secretsecretsecret' }, 'http');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('sbot_secret');
    expect(JSON.parse(lines[0]!).token).toBe('[redacted]');
    const quiet = capture('warn');
    infoLine(quiet.logger, { requestId: 'r-3' }, 'http');
    expect(quiet.lines).toHaveLength(0);
  });
});
