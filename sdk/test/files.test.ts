/**
 * uploadFile against the real service: a plain upload (hash while streaming, PUT,
 * complete), a trusted reuse hit, a possession challenge answered from the local
 * file, an answer without uploadRequired, and a retry after a lost answer that
 * keeps its reuseRequestId and so gets the same file_id.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../../test/helpers/harness.js';
import { BotPlatformError, createBotClient, uploadFile } from '../src/index.js';
import { sdkAccount, type SdkAccount } from './helpers.js';
import { startProxy } from './proxy.js';

describe('uploadFile', () => {
  let h: Harness;
  let alice: SdkAccount;
  let bob: SdkAccount;
  let dir: string;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    h = await startHarness();
    alice = await sdkAccount(h, 'sdk-files-alice');
    bob = await sdkAccount(h, 'sdk-files-bob');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-sdk-files-'));
  });
  afterAll(async () => {
    for (const c of closers) await c();
    await h?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const sha = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');
  const randomFile = (name: string, size: number) => {
    const bytes = crypto.randomBytes(size);
    const file = path.join(dir, name);
    fs.writeFileSync(file, bytes);
    return { file, bytes };
  };

  it('uploads a file from disk and returns a file_id that sendDocument and getFile accept', async () => {
    const bot = await alice.approvedBot('sdk_files_upload');
    const { file, bytes } = randomFile('report.bin', 3 * 1024 * 1024 + 17);
    const up = await uploadFile(bot.bot, { path: file, fileType: 'application/octet-stream' });
    expect(up.via).toBe('upload');
    expect(up.checksum).toBe(sha(bytes));
    expect(up.file).toMatchObject({ file_id: up.file_id, file_name: 'report.bin', file_size: bytes.length, checksum: sha(bytes) });

    const meta = await bot.bot.getFile({ file_id: up.file_id });
    const downloaded = Buffer.from(await (await fetch(meta.download_url!)).arrayBuffer());
    expect(downloaded.equals(bytes)).toBe(true);

    const chat = await alice.console.createTestUpdate({ id: bot.id, text: 'send me the report', chat_id: 5151 });
    expect(chat.update_seq).toBe(1);
    const sent = await bot.bot.sendDocument({ chat_id: 5151, file_id: up.file_id, caption: 'here' });
    expect(sent).toMatchObject({ chat: { id: 5151 }, caption: 'here', document: { file_id: up.file_id } });
  });

  it('the same content again is a trusted reuse hit: a new file_id, no bytes sent', async () => {
    const bot = await alice.approvedBot('sdk_files_reuse');
    const data = crypto.randomBytes(40_000);
    const first = await uploadFile(bot.bot, { data, fileName: 'a.png', fileType: 'image/png' });
    const second = await uploadFile(bot.bot, { data, fileName: 'b.png', fileType: 'image/png' });
    expect(first.via).toBe('upload');
    expect(second.via).toBe('reuse');
    expect(second.file_id).not.toBe(first.file_id);
    expect(second.file).toMatchObject({ file_name: 'b.png', checksum: sha(data) });
    // One logical upload retried with its reuseRequestId answers the same file_id.
    const again = await uploadFile(bot.bot, { data, fileName: 'b.png', fileType: 'image/png', reuseRequestId: second.reuseRequestId });
    expect(again.file_id).toBe(second.file_id);
  });

  it('answers a possession challenge from the local file when another account holds the content', async () => {
    const aliceBot = await alice.approvedBot('sdk_files_owner');
    const bobBot = await bob.approvedBot('sdk_files_prover');
    const { file, bytes } = randomFile('shared.pdf', 200_000);
    const original = await uploadFile(aliceBot.bot, { path: file, fileType: 'application/pdf' });
    expect(original.via).toBe('upload');

    const proved = await uploadFile(bobBot.bot, { path: file, fileType: 'application/pdf' });
    expect(proved.via).toBe('possession');
    expect(proved.file_id).not.toBe(original.file_id);
    const meta = await bobBot.bot.getFile({ file_id: proved.file_id });
    expect(meta).toMatchObject({ checksum: sha(bytes), file_size: bytes.length });
    // Alice's file is not Bob's.
    expect(await bobBot.bot.getFile({ file_id: original.file_id }).catch((e: unknown) => e)).toMatchObject({ httpStatus: 404 });
  });

  it('a possession lock-out is thrown at once with its retryAfter, not waited out', async () => {
    const aliceBot = await alice.approvedBot('sdk_files_locked_owner');
    const bobBot = await bob.approvedBot('sdk_files_locked_taker');
    const { file, bytes } = randomFile('locked.bin', 50_000);
    await uploadFile(aliceBot.bot, { path: file });
    // Bob's account asks for challenges it never answers until its tries are used up.
    for (let i = 0; ; i++) {
      const asked = await bobBot.bot.createUploadCredentials({ fileName: 'locked.bin', fileSize: bytes.length, checksum: sha(bytes), reuseRequestId: `ask-${i}` })
        .then(() => undefined, (e: unknown) => e as BotPlatformError);
      if (asked) {
        expect(asked).toMatchObject({ httpStatus: 429 });
        break;
      }
      expect(i).toBeLessThan(20);
    }
    const started = Date.now();
    const locked = await uploadFile(bobBot.bot, { path: file }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(locked).toBeInstanceOf(BotPlatformError);
    expect((locked as BotPlatformError).retryAfter).toBeGreaterThan(60);
  });

  it('uploads when the answer leaves out uploadRequired', async () => {
    const bot = await alice.approvedBot('sdk_files_absent');
    const proxy = await startProxy(h.url);
    closers.push(proxy.close);
    let stripped = 0;
    proxy.onAnswer((p, status, body) => {
      if (!p.endsWith('/files/upload-credentials') || status !== 200) return undefined;
      const parsed = JSON.parse(body);
      delete parsed.result.uploadRequired;
      stripped++;
      return JSON.stringify(parsed);
    });
    const data = crypto.randomBytes(10_000);
    const up = await uploadFile(createBotClient(bot.token, { baseUrl: proxy.url }), { data, fileName: 'x.bin' });
    expect(stripped).toBe(1);
    expect(up.via).toBe('upload');
    expect((await bot.bot.getFile({ file_id: up.file_id })).checksum).toBe(sha(data));
  });

  it('a lost answer to complete is retried with the same reuseRequestId and yields the same file_id', async () => {
    const bot = await alice.approvedBot('sdk_files_retry');
    const proxy = await startProxy(h.url);
    closers.push(proxy.close);
    const lost: string[] = [];
    const seenIds: string[] = [];
    proxy.onAnswer((p, status, body) => {
      if (p.endsWith('/files/upload-credentials') || p.endsWith('/files/complete')) seenIds.push(p);
      if (p.endsWith('/files/complete') && status === 200 && lost.length === 0) {
        lost.push(JSON.parse(body).result.file_id);
        return 'drop';
      }
      return undefined;
    });
    const data = crypto.randomBytes(20_000);
    const up = await uploadFile(createBotClient(bot.token, { baseUrl: proxy.url }), { data, fileName: 'retry.bin' });
    expect(lost).toHaveLength(1);
    expect(up.file_id).toBe(lost[0]);
    expect(up.via).toBe('reuse');
    expect(seenIds.map((p) => p.split('/').pop())).toEqual(['upload-credentials', 'complete', 'upload-credentials']);
  });

  it('refuses bad input before calling the service, and reports the service\'s refusals as BotPlatformError', async () => {
    const bot = await alice.approvedBot('sdk_files_bad');
    await expect(uploadFile(bot.bot, { data: new Uint8Array(3) })).rejects.toThrow(/fileName/);
    await expect(uploadFile(bot.bot, {})).rejects.toThrow(/path or data/);
    const empty = await uploadFile(bot.bot, { data: new Uint8Array(0), fileName: 'empty.txt' }).catch((e: unknown) => e);
    expect(empty).toBeInstanceOf(BotPlatformError);
    expect(empty).toMatchObject({ httpStatus: 400, code: 'INVALID_ARGUMENT' });
  });
});
