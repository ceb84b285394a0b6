/**
 * Echo bot by webhook: an HTTPS server that verifies each delivery and answers it.
 *
 *   BOT_TOKEN=sbot_... TLS_CERT=cert.pem TLS_KEY=key.pem npm run example:echo-webhook
 *
 * It listens on HOST:PORT (default 127.0.0.1:8443), registers WEBHOOK_URL (default
 * https://HOST:PORT/webhook) with setWebhook and a secret (WEBHOOK_SECRET, or a
 * random one). Without TLS_CERT/TLS_KEY it serves plain HTTP, for running behind a
 * TLS-terminating proxy; WEBHOOK_URL must then be the proxy's public https URL.
 * The service refuses webhooks to loopback unless started with
 * WEBHOOK_ALLOWED_CIDRS=127.0.0.0/8, and trusts a self-signed certificate only when
 * WEBHOOK_CA_FILE names it (see docs/sdk.md).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { createBotClient, createNodeWebhookHandler } from '../src/index.js';
import { botSettings, echo } from './echo.js';

const { token, baseUrl } = botSettings('echo-webhook');
const host = process.env.HOST ?? '127.0.0.1';
const port = Number(process.env.PORT ?? 8443);
const tls = process.env.TLS_CERT && process.env.TLS_KEY
  ? { cert: fs.readFileSync(process.env.TLS_CERT), key: fs.readFileSync(process.env.TLS_KEY) }
  : undefined;
const url = process.env.WEBHOOK_URL ?? (tls ? `https://${host}:${port}/webhook` : undefined);
if (!url) {
  console.error('echo-webhook: set TLS_CERT and TLS_KEY, or WEBHOOK_URL (the public https URL of a proxy in front of this server)');
  process.exit(2);
}
const secret = process.env.WEBHOOK_SECRET ?? crypto.randomBytes(24).toString('base64url');
const bot = createBotClient(token, { baseUrl });
const log = (line: string) => console.log(`echo-webhook: ${line}`);

const handler = createNodeWebhookHandler({
  secret,
  onUpdate: (update) => echo(bot, update, log),
  onRejected: (err) => log(`refused a delivery: ${err.message}`),
  onError: (err, update) => log(`update ${update.update_id} failed (the service will retry): ${(err as Error).message}`),
});
const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
await new Promise<void>((resolve) => server.listen(port, host, resolve));

const me = await bot.getMe();
await bot.setWebhook({ url, secret_token: secret });
log(`@${me.username} receives by webhook at ${url} (listening on ${host}:${port})`);

const shutdown = () => {
  // The webhook stays set: the service keeps (and retries) deliveries until the bot is back.
  server.close(() => log('stopped'));
  server.closeAllConnections();
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
