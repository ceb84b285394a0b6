/**
 * Webhook secrets that stay and rotate (issue 35), against real HTTPS receivers on
 * loopback: the console edits a webhook's settings without a new secret (deliveries keep
 * the old signature), and a rotation keeps the previous secret valid for its overlap,
 * during which every delivery carries both signatures and the SDK's verifier accepts it
 * under either secret, also while deliveries flow, and ends with it; over HTTP and gRPC,
 * with the refusals in the contract's shape.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook, WebhookSignatureError } from '../sdk/src/webhook.js';
import { ConsoleServiceClient, type RotateWebhookSecretResponse } from '../src/gen/botplatform/v1/console_service.js';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';
import { startReceiver, type Received, type Receiver } from './helpers/receiver.js';
import { createTestPki, type TestPki } from './helpers/tls.js';

const OLD = 'old_secret-123';
const NEW = 'new_secret-456';

describe('webhook secrets: edits that keep them, rotation with an overlap', () => {
  let h: Harness;
  let pki: TestPki;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_RETRY_SCHEDULE: '100ms',
      WEBHOOK_TIMEOUT_MS: '2000',
    });
    ownerJwt = await h.jwt('hook-secrets-owner');
    owner = client(h.url, ownerJwt);
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await h?.close();
  });

  async function hookedBot(name: string) {
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    const bot = await approvedBot(h, ownerJwt, name);
    const set = await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: OLD, max_connections: 1 });
    expect(set.status).toBe(200);
    return { ...bot, receiver };
  }
  /** Injects a test message and answers the request the receiver got for it. */
  async function delivered(id: string, receiver: Receiver): Promise<Received> {
    const n = receiver.received.length;
    expect((await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text: `hi ${n}` })).status).toBe(201);
    await receiver.waitFor(n + 1);
    return receiver.received[n]!;
  }
  const verifies = (r: Received, secret: string) => {
    try {
      return verifyWebhook(r.raw, r.headers, { secret }).update_id > 0;
    } catch (err) {
      if (err instanceof WebhookSignatureError) return false;
      throw err;
    }
  };
  const signatures = (r: Received) => String(r.headers['x-service-signature-v2']).split(' ');

  it('settings change without a secret: the old one keeps signing; a new webhook without one is refused', async () => {
    const { id, receiver } = await hookedBot('sec_edit');
    const edit = await owner.post(`/api/v1/bots/my/${id}/webhook`, { url: receiver.url, max_connections: 7, allowed_updates: ['message'] });
    expect(edit.status).toBe(200);
    expect(edit.body.webhook).toMatchObject({ max_connections: 7, allowed_updates: ['message'], has_secret_token: true });
    const r = await delivered(id, receiver);
    expect(signatures(r)).toHaveLength(1);
    expect(verifies(r, OLD)).toBe(true);

    const fresh = await approvedBot(h, ownerJwt, 'sec_fresh');
    const refused = await owner.post(`/api/v1/bots/my/${fresh.id}/webhook`, { url: receiver.url });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', details: [{ field: 'secret_token', reason: 'REQUIRED' }] });
    expect(refused.body.error.message).toContain('secret_token: is required for a new webhook');

    // The runtime's setWebhook still needs one (Telegram's has no "keep").
    expect((await client(h.url, fresh.token).post('/api/v1/bots/setWebhook', { url: receiver.url })).status).toBe(400);
  });

  it('a rotation: both signatures for the overlap, the new one first; the verifier accepts either secret; an edit keeps the overlap', async () => {
    const { id, receiver } = await hookedBot('sec_rotate');
    const before = Date.now();
    const rotated = await owner.post(`/api/v1/bots/my/${id}/webhook/rotate-secret`, { secret_token: NEW });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret_token).toBe(NEW);
    const until = Date.parse(rotated.body.bot.webhook.previous_secret_expires_at);
    expect(until).toBeGreaterThanOrEqual(before + 86_400_000);
    expect(until).toBeLessThan(Date.now() + 86_400_000 + 1000);

    const r = await delivered(id, receiver);
    expect(signatures(r)).toHaveLength(2);
    expect(verifies(r, NEW)).toBe(true);
    expect(verifies(r, OLD)).toBe(true);
    expect(verifies(r, 'another_secret')).toBe(false);

    // Changing the settings keeps both secrets and the overlap.
    const edit = await owner.post(`/api/v1/bots/my/${id}/webhook`, { url: receiver.url, max_connections: 3 });
    expect(edit.body.webhook.previous_secret_expires_at).toBe(rotated.body.bot.webhook.previous_secret_expires_at);
    const again = await delivered(id, receiver);
    expect(verifies(again, OLD) && verifies(again, NEW)).toBe(true);
    // Reads never carry a secret.
    expect(JSON.stringify((await owner.get(`/api/v1/bots/my/${id}`)).body)).not.toContain(NEW);

    // A new secret through the settings replaces both at once.
    const reset = await owner.post(`/api/v1/bots/my/${id}/webhook`, { url: receiver.url, secret_token: 'third_secret' });
    expect(reset.body.webhook.previous_secret_expires_at).toBeNull();
    const third = await delivered(id, receiver);
    expect(signatures(third)).toHaveLength(1);
    expect(verifies(third, 'third_secret')).toBe(true);
    expect(verifies(third, NEW)).toBe(false);
  });

  it('an overlap of 0 ends the old secret at once; a secret the service makes is answered once; refusals', async () => {
    const { id, receiver } = await hookedBot('sec_now');
    const rotated = await owner.post(`/api/v1/bots/my/${id}/webhook/rotate-secret`, { overlap_seconds: 0 });
    expect(rotated.status).toBe(200);
    const made = rotated.body.secret_token as string;
    expect(made).toMatch(/^[A-Za-z0-9]{43}$/);
    expect(rotated.body.bot.webhook.previous_secret_expires_at).toBeNull();
    const r = await delivered(id, receiver);
    expect(signatures(r)).toHaveLength(1);
    expect(verifies(r, made)).toBe(true);
    expect(verifies(r, OLD)).toBe(false);

    const bad = await owner.post(`/api/v1/bots/my/${id}/webhook/rotate-secret`, { secret_token: 'has space', overlap_seconds: 604801 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.map((d: { field: string }) => d.field)).toEqual(['secret_token', 'overlap_seconds']);
    const polling = await approvedBot(h, ownerJwt, 'sec_polling');
    const none = await owner.post(`/api/v1/bots/my/${polling.id}/webhook/rotate-secret`, {});
    expect(none.status).toBe(409);
    expect(none.body.error).toMatchObject({ status: 'FAILED_PRECONDITION', message: 'the bot has no webhook set' });
    const other = client(h.url, await h.jwt('hook-secrets-stranger'));
    expect((await other.post(`/api/v1/bots/my/${id}/webhook/rotate-secret`, {})).status).toBe(404);
  });

  it('a rotation while deliveries flow: none lost, every one accepted on the old secret, and those sent after it on the new one too', async () => {
    const { id, receiver } = await hookedBot('sec_flow');
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    let flowing = true;
    let sent = 0;
    const flow = (async () => {
      while (flowing) {
        expect((await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text: `flow ${sent}` })).status).toBe(201);
        sent++;
        await sleep(20);
      }
    })();
    await receiver.waitFor(5);
    const rotated = await owner.post(`/api/v1/bots/my/${id}/webhook/rotate-secret`, { secret_token: NEW });
    expect(rotated.status).toBe(200);
    const answered = Date.now();
    await sleep(2500);
    flowing = false;
    await flow;
    await receiver.waitFor(sent);
    const updates = new Set(receiver.received.map((r) => JSON.parse(r.raw.toString()).update_id));
    expect(updates.size).toBe(sent);
    // A receiver that stays on the old secret through the overlap accepts every delivery.
    expect(receiver.received.filter((r) => !verifies(r, OLD))).toEqual([]);
    // One that moves to the new secret once the rotation answered accepts every delivery sent
    // after it (a second's grace for one claimed before the rotation and still in flight).
    const later = receiver.received.filter((r) => r.at > answered + 1000);
    expect(later.length).toBeGreaterThan(5);
    expect(later.filter((r) => !verifies(r, NEW)).map((r) => r.at - answered)).toEqual([]);
  });

  it('when the overlap ends, only the new secret signs and the bot no longer names a previous one', async () => {
    const { id, receiver } = await hookedBot('sec_lapse');
    const rotated = await owner.post(`/api/v1/bots/my/${id}/webhook/rotate-secret`, { secret_token: NEW, overlap_seconds: 1 });
    expect(rotated.status).toBe(200);
    const ends = Date.parse(rotated.body.bot.webhook.previous_secret_expires_at);
    await new Promise((r) => setTimeout(r, Math.max(0, ends - Date.now()) + 50));
    expect((await owner.get(`/api/v1/bots/my/${id}`)).body.webhook.previous_secret_expires_at).toBeNull();
    const after = await delivered(id, receiver);
    expect(signatures(after)).toHaveLength(1);
    expect(verifies(after, NEW)).toBe(true);
    expect(verifies(after, OLD)).toBe(false);
  });

  it('rotates over gRPC too', async () => {
    const { id, receiver } = await hookedBot('sec_grpc');
    const c = new ConsoleServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    try {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${ownerJwt}`);
      const rotate = (req: object) => new Promise<RotateWebhookSecretResponse>((resolve, reject) =>
        c.rotateWebhookSecret({ id, secretToken: '', ...req } as never, md, (err, res) => (err ? reject(err) : resolve(res))));
      const res = await rotate({ secretToken: NEW, overlapSeconds: 60 });
      expect(res.secretToken).toBe(NEW);
      expect(res.bot!.webhook!.previousSecretExpiresAt!.getTime()).toBeGreaterThan(Date.now() + 55_000);
      await expect(rotate({ overlapSeconds: -1 })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    } finally {
      c.close();
    }
    const r = await delivered(id, receiver);
    expect(verifies(r, OLD) && verifies(r, NEW)).toBe(true);
  });
});
