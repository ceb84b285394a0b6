/** The RPC → domain function table. Each entry receives an already-authenticated principal. */
import type { AccountPrincipal } from '../auth/account-jwt.js';
import { AdminServiceService } from '../gen/botplatform/v1/admin_service.js';
import { ConsoleServiceService } from '../gen/botplatform/v1/console_service.js';
import { RuntimeServiceService } from '../gen/botplatform/v1/runtime_service.js';
import type { AdminService } from '../domain/admin-service.js';
import type { ConsoleService } from '../domain/console-service.js';
import type { RuntimeService } from '../domain/runtime-service.js';
import type { BotPrincipal, CallContext, Principal } from './context.js';
import type { Handler } from './core.js';

interface Services {
  console: ConsoleService;
  admin: AdminService;
  runtime: RuntimeService;
}

type Ctx<P extends Principal> = CallContext<P>;

export function createHandlers({ console, admin, runtime }: Services): Record<string, Handler> {
  const c = ConsoleServiceService;
  const a = AdminServiceService;
  const r = RuntimeServiceService;
  return {
    [c.createApplication.path]: (req, ctx: Ctx<AccountPrincipal>) => console.createApplication(ctx.principal, req),
    [c.listMyBots.path]: (req, ctx: Ctx<AccountPrincipal>) => console.listMyBots(ctx.principal, req),
    [c.getMyBot.path]: (req, ctx: Ctx<AccountPrincipal>) => console.getMyBot(ctx.principal, req),
    [c.updateMyBot.path]: (req, ctx: Ctx<AccountPrincipal>) => console.updateMyBot(ctx.principal, req),
    [c.regenerateToken.path]: (req, ctx: Ctx<AccountPrincipal>) => console.regenerateToken(ctx.principal, req),
    [a.listBots.path]: (req) => admin.listBots(req),
    [a.approveBot.path]: (req) => admin.approveBot(req),
    [a.rejectBot.path]: (req) => admin.rejectBot(req),
    [r.getMe.path]: (_req, ctx: Ctx<BotPrincipal>) => runtime.getMe(ctx.principal),
  };
}
