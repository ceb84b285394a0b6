/** @botplatform/sdk: typed clients, webhook verification, long polling, a command and callback router. */
export * from './generated/api.js';
export { createAdminClient, createBotClient, createConsoleClient, type AdminClient, type BotClient, type ClientOptions, type ConsoleClient } from './clients.js';
export { BotPlatformError, type BotPlatformErrorInit, type ErrorCode, type ErrorDetail } from './errors.js';
export type { CallOptions } from './http.js';
export {
  DEFAULT_TOLERANCE_SECONDS,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  UPDATE_ID_HEADER,
  signWebhook,
  verifyWebhook,
  WebhookBodyError,
  WebhookInvalidTimestampError,
  WebhookMissingHeaderError,
  WebhookSignatureError,
  WebhookTimestampError,
  WebhookUpdateIdMismatchError,
  WebhookVerificationError,
  type HeaderSource,
  type VerifyOptions,
  type WebhookFailure,
} from './webhook.js';
export {
  createNodeWebhookHandler,
  expressWebhook,
  fastifyWebhook,
  handleWebhookDelivery,
  type FastifyWebhookOptions,
  type WebhookHandlerOptions,
} from './webhook-adapters.js';
export { PollingConflictError, runPolling, WebhookActiveError, type PollingOptions } from './polling.js';
export { MediaUploadCache } from './media-upload-cache.js';
export { uploadFile, type UploadedFile, type UploadFileOptions } from './files.js';
export {
  CallbackQueryContext,
  CommandContext,
  Context,
  InlineQueryContext,
  inlineKeyboard,
  parseCommand,
  Router,
  type Handler,
  type ParsedCommand,
  type RouterOptions,
  type UpdateKind,
} from './router.js';
export { Bot, createBot, type BotOptions } from './bot.js';
