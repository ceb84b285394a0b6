/** The RPC → domain function table. Each entry receives an already-authenticated principal. */
import type { AccountPrincipal } from '../auth/account-jwt.js';
import { AdminServiceService } from '../gen/botplatform/v1/admin_service.js';
import { ConsoleServiceService } from '../gen/botplatform/v1/console_service.js';
import { InternalServiceService } from '../gen/botplatform/v1/internal_service.js';
import { RuntimeServiceService } from '../gen/botplatform/v1/runtime_service.js';
import type { AdminService } from '../domain/admin-service.js';
import type { ConsoleService } from '../domain/console-service.js';
import type { RuntimeService } from '../domain/runtime-service.js';
import type { UpdatesService } from '../domain/updates-service.js';
import type { DeliveriesService } from '../domain/deliveries-service.js';
import type { FilesService } from '../domain/files-service.js';
import type { MessagesService } from '../domain/messages-service.js';
import type { BotPrincipal, CallContext, Principal } from './context.js';
import type { Handler } from './core.js';

interface Services {
  console: ConsoleService;
  admin: AdminService;
  runtime: RuntimeService;
  updates: UpdatesService;
  deliveries: DeliveriesService;
  messages: MessagesService;
  files: FilesService;
}

type Ctx<P extends Principal> = CallContext<P>;

export function createHandlers({ console, admin, runtime, updates, deliveries, messages, files }: Services): Record<string, Handler> {
  const c = ConsoleServiceService;
  const a = AdminServiceService;
  const r = RuntimeServiceService;
  const i = InternalServiceService;
  const webhookInput = (req: any) => ({ // eslint-disable-line @typescript-eslint/no-explicit-any
    url: req.url,
    secretToken: req.secretToken,
    allowedUpdates: req.allowedUpdates,
    allowedIps: req.allowedIps,
    maxConnections: req.maxConnections,
    dropPendingUpdates: req.dropPendingUpdates,
  });
  return {
    [c.createApplication.path]: (req, ctx: Ctx<AccountPrincipal>) => console.createApplication(ctx.principal, req),
    [c.listMyBots.path]: (req, ctx: Ctx<AccountPrincipal>) => console.listMyBots(ctx.principal, req),
    [c.getMyBot.path]: (req, ctx: Ctx<AccountPrincipal>) => console.getMyBot(ctx.principal, req),
    [c.updateMyBot.path]: (req, ctx: Ctx<AccountPrincipal>) => console.updateMyBot(ctx.principal, req),
    [c.regenerateToken.path]: (req, ctx: Ctx<AccountPrincipal>) => console.regenerateToken(ctx.principal, req),
    [a.listBots.path]: (req) => admin.listBots(req),
    [a.approveBot.path]: (req) => admin.approveBot(req),
    [a.rejectBot.path]: (req) => admin.rejectBot(req),
    [c.setBotWebhook.path]: async (req, ctx: Ctx<AccountPrincipal>) => {
      const id = await updates.setOwnBotWebhook(ctx.principal, req.id, webhookInput(req));
      return { bot: await console.botDetail(ctx.principal, id) };
    },
    [c.deleteBotWebhook.path]: async (req, ctx: Ctx<AccountPrincipal>) => {
      const id = await updates.deleteOwnBotWebhook(ctx.principal, req.id, req.dropPendingUpdates);
      return { bot: await console.botDetail(ctx.principal, id) };
    },
    [c.listDeliveries.path]: (req, ctx: Ctx<AccountPrincipal>) => deliveries.listDeliveries(ctx.principal, req),
    [c.retryDelivery.path]: (req, ctx: Ctx<AccountPrincipal>) => deliveries.retryDelivery(ctx.principal, req),
    [c.createTestUpdate.path]: (req, ctx: Ctx<AccountPrincipal>) => updates.createTestUpdate(ctx.principal, req),
    [r.getMe.path]: (_req, ctx: Ctx<BotPrincipal>) => runtime.getMe(ctx.principal),
    [r.getUpdates.path]: (req, ctx: Ctx<BotPrincipal>) => updates.getUpdates(ctx.principal, req, ctx.signal),
    [r.setWebhook.path]: async (req, ctx: Ctx<BotPrincipal>) => {
      await updates.setWebhook(ctx.principal.botId, webhookInput(req));
      return { result: true };
    },
    [r.deleteWebhook.path]: async (req, ctx: Ctx<BotPrincipal>) => {
      await updates.deleteWebhook(ctx.principal.botId, req.dropPendingUpdates);
      return { result: true };
    },
    [r.getWebhookInfo.path]: async (_req, ctx: Ctx<BotPrincipal>) => ({ result: await updates.getWebhookInfo(ctx.principal) }),
    [r.sendMessage.path]: async (req, ctx: Ctx<BotPrincipal>) => ({ result: await messages.sendMessage(ctx.principal, req) }),
    [r.sendPhoto.path]: async (req, ctx: Ctx<BotPrincipal>) => ({ result: await messages.sendPhoto(ctx.principal, req) }),
    [r.sendDocument.path]: async (req, ctx: Ctx<BotPrincipal>) => ({ result: await messages.sendDocument(ctx.principal, req) }),
    [r.createUploadCredentials.path]: async (req, ctx: Ctx<BotPrincipal>) =>
      ({ result: await files.createUploadCredentials(ctx.principal, req, ctx.metadata) }),
    [r.completeUpload.path]: (req, ctx: Ctx<BotPrincipal>) => files.completeUpload(ctx.principal, req),
    [r.provePossession.path]: async (req, ctx: Ctx<BotPrincipal>) => ({ result: await files.provePossession(ctx.principal, req) }),
    [r.getFile.path]: async (req, ctx: Ctx<BotPrincipal>) => ({ result: await files.getFile(ctx.principal, req, ctx.metadata) }),
    [i.ingestUpdates.path]: (req) => updates.ingest(req),
  };
}
