/**
 * The parts of the dispatcher role that every process or thread running it builds: the
 * dispatcher itself, and who runs the methods in Telegram-surface webhook answers. Used
 * by the composition root (src/app.ts) and by the dispatcher threads of ROLE=all
 * (src/dispatcher-thread.ts), which load this and not the gateway's server.
 */
import type { Backend } from './backend.js';
import { createDispatcher, type Dispatcher } from './dispatch/dispatcher.js';
import type { Root } from './process.js';
import type { Invoker } from '../gateway/runtime/invoker.js';
import { createCodec } from '../gateway/runtime/codec.js';
import { createTelegramMethods } from '../gateway/runtime/telegram.js';
import { createWebhookAnswers } from '../gateway/runtime/telegram-webhook-answers.js';
import { createBotGrants } from './auth/bot-grants.js';
import { secretKeyOf } from './auth/secret-key.js';
import { routeTable } from '../gateway/generated/routes.js';

/**
 * The webhook dispatcher: delivers what the deliveries table holds, until shutdown.
 * `owns`: the bots its sweep takes (a dispatcher thread's share); all when not given.
 */
export async function startDispatcher({ config, logger, telemetry, shutdown }: Root, b: Backend, owns?: (botId: string) => boolean): Promise<Dispatcher> {
  const dispatcher = createDispatcher({
    deliveries: b.deliveries,
    webhooks: b.webhooks,
    attempts: b.attempts,
    bus: b.bus,
    logger,
    timeoutMs: config.webhookTimeoutMs,
    maxInFlight: config.dispatcherMaxInFlight,
    sweepMs: Math.max(50, Math.min(1000, Math.min(...config.webhookRetryScheduleMs) / 4)),
    owns,
  });
  await dispatcher.start();
  telemetry.gauge('botplatform_webhook_attempts_in_flight', 'Webhook delivery attempts in flight in this process', () => dispatcher.inFlight());
  shutdown.add('dispatcher', 'dispatcher', () => dispatcher.stop());
  return dispatcher;
}

/**
 * Methods bots return in answers to their Telegram-surface webhooks, run as the bot through
 * `invoker` (gateway/runtime/telegram-webhook-answers.ts).
 */
export function runWebhookAnswers({ config, logger, telemetry }: Root, b: Backend, invoker: Invoker): void {
  b.attempts.handleAnswers(createWebhookAnswers({
    methods: createTelegramMethods(routeTable, createCodec(routeTable)),
    invoker,
    grants: createBotGrants(secretKeyOf(config)),
    logger,
    maxBodyBytes: config.maxBodyBytes,
    timeoutMs: config.requestTimeoutMs,
    onOutcome: (outcome) => telemetry.webhookAnswer(outcome),
  }));
}
