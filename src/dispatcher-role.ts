/**
 * The parts of the dispatcher role that every process or thread running it builds: the
 * dispatcher itself, and who runs the methods in Telegram-surface webhook answers. Used
 * by the composition root (src/app.ts) and by the dispatcher threads of ROLE=all
 * (src/dispatcher-thread.ts), which load this and not the gateway's server.
 */
import type { Backend } from './backend.js';
import { createDispatcher, type Dispatcher } from './dispatch/dispatcher.js';
import { originOf } from './dispatch/webhook-client.js';
import type { Root } from './process.js';
import type { AnswerHandler } from './dispatch/attempts.js';
import type { Invoker } from '../gateway/runtime/invoker.js';

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
    perOrigin: b.webhookTurnsPerOrigin,
    originOf,
  });
  await dispatcher.start();
  telemetry.gauge('botplatform_webhook_attempts_in_flight', 'Webhook delivery attempts in flight in this process', () => dispatcher.inFlight());
  shutdown.add('dispatcher', 'dispatcher', () => dispatcher.stop());
  return dispatcher;
}

/**
 * Methods bots return in answers to their Telegram-surface webhooks, run as the bot through
 * the invoker `invokerOf` gives (gateway/runtime/telegram-webhook-answers.ts). What runs them
 * (the route table, the codec, the Telegram surface's methods, and in a dispatcher thread the
 * gRPC client) is loaded at the first answer with a body, not at start: a dispatcher thread
 * whose bots answer nothing never holds it (about 8 MB of code and heap per thread).
 */
export function runWebhookAnswers({ config, logger, telemetry }: Root, b: Backend, invokerOf: () => Invoker | Promise<Invoker>): void {
  let loading: Promise<AnswerHandler> | undefined;
  const load = async (): Promise<AnswerHandler> => {
    const [{ createWebhookAnswers }, { createTelegramMethods }, { createCodec }, { routeTable }, { createBotGrants }, { secretKeyOf }] = await Promise.all([
      import('../gateway/runtime/telegram-webhook-answers.js'), import('../gateway/runtime/telegram.js'), import('../gateway/runtime/codec.js'),
      import('../gateway/generated/routes.js'), import('./auth/bot-grants.js'), import('./auth/secret-key.js'),
    ]);
    return createWebhookAnswers({
      methods: createTelegramMethods(routeTable, createCodec(routeTable)),
      invoker: await invokerOf(),
      grants: createBotGrants(secretKeyOf(config)),
      logger,
      maxBodyBytes: config.maxBodyBytes,
      timeoutMs: config.requestTimeoutMs,
      onOutcome: (outcome) => telemetry.webhookAnswer(outcome),
    });
  };
  b.attempts.handleAnswers(async (botId, answer) => {
    let handler: AnswerHandler;
    try {
      handler = await (loading ??= load());
    } catch (err) {
      loading = undefined;
      logger.error({ err, bot: botId }, 'webhook answer not run: what runs its method could not be loaded');
      return;
    }
    return handler(botId, answer);
  });
}
