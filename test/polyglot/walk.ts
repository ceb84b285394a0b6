/**
 * What test/polyglot's clients share: running a client program against a harness (its
 * credentials passed in the environment, never as arguments) and the walk's summary
 * that every language must print the same way.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { expect } from 'vitest';
import { TEST_INTERNAL_TOKEN, type Harness } from '../helpers/harness.js';

export const ROOT = path.resolve(import.meta.dirname, '../..');

export interface RunResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Async: the service runs in this process, so a blocking spawn would starve it. */
export function run(file: string, args: string[], opts: { cwd?: string; env?: Record<string, string>; timeout?: number } = {}) {
  return new Promise<RunResult>((resolve) => {
    execFile(file, args, {
      cwd: opts.cwd ?? ROOT,
      env: { ...process.env, ...opts.env },
      encoding: 'utf8',
      timeout: opts.timeout ?? 120_000,
      maxBuffer: 16 * 1024 * 1024,
    }, (err, stdout, stderr) => {
      const code = err ? (err as { code?: unknown }).code : 0;
      resolve({ status: typeof code === 'number' ? code : 1, stdout, stderr: err && typeof code !== 'number' ? `${stderr}${err.message}` : stderr });
    });
  });
}

/** Runs a step that must succeed (tool install, stub generation, build), or throws with its output. */
export async function mustRun(what: string, file: string, args: string[], opts: Parameters<typeof run>[2] = {}) {
  const res = await run(file, args, opts);
  if (res.status !== 0) throw new Error(`${what} failed (exit ${res.status}):\n${res.stderr}\n${res.stdout}`);
  return res.stdout;
}

/** Fails with a clear message when a toolchain a client needs is not installed. */
export async function requireTool(file: string, args: string[], hint: string) {
  const res = await run(file, args, { timeout: 30_000 });
  if (res.status !== 0) throw new Error(`${file} is needed for the polyglot client tests and was not found (${hint})`);
  return res.stdout.trim() || res.stderr.trim();
}

/** The environment a client program reads its address and credentials from. */
export async function clientEnv(h: Harness, username: string) {
  return {
    BOTPLATFORM_GRPC_ADDRESS: h.grpcAddress,
    BOTPLATFORM_DEVELOPER_JWT: await h.jwt(`polyglot-${username}`),
    BOTPLATFORM_ADMIN_JWT: await h.jwt('polyglot-reviewer', { admin: true }),
    BOTPLATFORM_INTERNAL_TOKEN: TEST_INTERNAL_TOKEN,
    BOTPLATFORM_USERNAME: username,
  };
}

/** Parses a client's JSON summary, failing with what it printed when it stopped at a step. */
export function summaryOf(res: RunResult): Record<string, any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const last = res.stdout.trim().split('\n').pop() ?? '';
  let parsed: Record<string, unknown> | undefined;
  try {
    parsed = JSON.parse(last);
  } catch {
    // reported below
  }
  if (res.status !== 0 || !parsed || 'failed_step' in parsed) {
    throw new Error(`the client failed (exit ${res.status}): ${res.stdout}\n${res.stderr}`);
  }
  return parsed;
}

/** The walk as every client must have seen it: the same values, whatever the language. */
export function expectWalk(s: Record<string, any>, expected: { username: string; chatId: number; language: string }) { // eslint-disable-line @typescript-eslint/no-explicit-any
  const { username, chatId, language } = expected;
  expect(s.steps).toEqual([
    'create_application', 'approve', 'token', 'get_me', 'ingest', 'streamed_ingest', 'long_poll', 'send_message', 'outbound_feed', 'validation_errors',
  ]);
  expect(s.created).toEqual({ id: expect.stringMatching(/\S/), review_status: 'REVIEW_STATUS_PENDING' });
  expect(s.approved).toEqual({ review_status: 'REVIEW_STATUS_APPROVED' });
  expect(s.token).toEqual({ token_prefix: expect.stringMatching(/^sbot_/), has_token: true });
  expect(s.get_me).toEqual({ id: s.created.id, username, is_bot: true });

  expect(s.ingest.update_id).toBeGreaterThan(0);
  expect(s.ingest.update_seq).toBe(1);
  // One acknowledgement per streamed batch, in order, each with its update's seq.
  expect(s.streamed_ingest).toEqual([
    { sequence: 1, update_seqs: [2], error: false },
    { sequence: 2, update_seqs: [3], error: false },
  ]);
  // The long poll sees the ingested update, with the ids the ingest answered, then the streamed ones.
  expect(s.long_poll.updates).toEqual([
    { update_id: s.ingest.update_id, chat_id: chatId, text: `hello from ${language}` },
    { update_id: expect.any(Number), chat_id: chatId, text: `streamed 1 from ${language}` },
    { update_id: expect.any(Number), chat_id: chatId, text: `streamed 2 from ${language}` },
  ]);
  expect(s.send_message).toEqual({ message_id: expect.any(Number), chat_id: chatId, text: `hello back, from ${language}` });
  expect(s.send_message.message_id).toBeGreaterThan(0);
  // The outbound feed carries what the bot sent.
  expect(s.outbound_feed).toEqual({ message_id: s.send_message.message_id, chat_id: chatId, text: `hello back, from ${language}`, seq: expect.any(Number) });
  expect(s.outbound_feed.seq).toBeGreaterThan(0);

  // Validation errors decoded from grpc-status-details-bin into their details.
  const create = s.validation_errors.create_application;
  expect(create.code).toBe('INVALID_ARGUMENT');
  expect(create.field_violations).toEqual([
    { field: 'name', reason: 'REQUIRED', description: expect.stringMatching(/\S/) },
    { field: 'username', reason: 'INVALID_FORMAT', description: expect.stringMatching(/\S/) },
  ]);
  // Two fields at fault: ErrorInfo names no single one (a single violation's field is in its metadata, below).
  expect(create.error_info).toEqual([{ reason: 'INVALID_ARGUMENT', domain: 'botplatform.dev', metadata: {} }]);

  const send = s.validation_errors.send_message;
  expect(send).toEqual({
    code: 'INVALID_ARGUMENT',
    message: 'chat_id: must be between -9007199254740991 and 9007199254740991',
    field_violations: [{ field: 'chat_id', reason: 'OUT_OF_RANGE', description: 'must be between -9007199254740991 and 9007199254740991' }],
    error_info: [{ reason: 'INVALID_ARGUMENT', domain: 'botplatform.dev', metadata: { field: 'chat_id' } }],
  });
}
