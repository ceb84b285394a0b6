/**
 * The developer console: an account's own bots. Every lookup is scoped to the
 * caller's account, so another account's bot is indistinguishable from none.
 */
import { generateBotToken, hashBotToken, randomBase62, tokenPrefixOf } from '../auth/bot-token.js';
import type { SecretBox } from '../auth/secret-box.js';
import { ApiError, Code } from '../errors.js';
import { constraintsOf } from '../gen/constraints.js';
import type { Bot, BotCommand, BotContact, BotLink, WebhookSummary } from '../gen/botplatform/v1/bot.js';
import { FriendRequestMode } from '../gen/botplatform/v1/bot.js';
import { ApplicationFields, BotProfile } from '../gen/botplatform/v1/console_service.js';
import type { ApplicationPatch, BotProfilePatch, BotRecord, BotsRepo, IssuedToken } from '../storage/bots-repo.js';
import type { UnitsOfWork } from '../storage/units.js';
import { Conflict } from '../storage/errors.js';
import { friendRequestModeName, telegramToken, toBotMessage } from './bot-view.js';
import { createOwnBots, notApproved } from './own-bot.js';
import { paged } from './pagination.js';
import type { ConsoleRpc } from './rpc.js';
import * as check from './validation.js';

/** The scopes a bot may ask for: the allowed_values CreateApplicationRequest.scopes declares. */
export const SCOPES = constraintsOf('botplatform.v1.CreateApplicationRequest', 'scopes').allowedValues;

export interface ConsoleDeps {
  bots: BotsRepo;
  /** The redacted webhook of a bot, for detail reads. */
  webhookOf: (botId: string) => Promise<WebhookSummary | undefined>;
  /** Which of these bots' webhooks are disabled (the list's webhook_disabled). */
  disabledWebhooks?: (botIds: string[]) => Promise<Set<string>>;
  secretBox: SecretBox;
  oneTimeTokenRetentionMs: number;
  /**
   * A bot's credentials changed (its old token is dead): every instance must stop
   * accepting what it verified before. Called after the change is committed.
   */
  credentialsChanged?: (botId: string) => Promise<void>;
  /** Deleting a bot (its webhook, queue and row together, a tombstone left). */
  units?: Pick<UnitsOfWork, 'deleteBot'>;
  /** DELETED_BOT_RETENTION: how long a deleted bot's data and approved username are kept. */
  deletedBotRetentionMs?: number;
  now?: () => number;
}

/** A fresh token; `deferred` keeps it sealed for the owner's next detail read. */
export function issueToken(deps: Pick<ConsoleDeps, 'secretBox' | 'oneTimeTokenRetentionMs'>, now: number, deferred: boolean) {
  const plaintext = generateBotToken();
  const issued: IssuedToken = {
    hash: hashBotToken(plaintext),
    prefix: tokenPrefixOf(plaintext),
    sealed: deferred ? deps.secretBox.seal(plaintext) : null,
    expiresAt: deferred ? now + deps.oneTimeTokenRetentionMs : null,
  };
  return { plaintext, issued };
}

function checkScopes(v: check.Violations, scopes: string[]): string[] {
  if (scopes.length === 0) return [...SCOPES];
  scopes.forEach((s, i) => {
    if (!(SCOPES as readonly string[]).includes(s)) v.add(`scopes[${i}]`, 'INVALID_VALUE', `must be one of ${SCOPES.join(', ')}`);
  });
  return [...new Set(scopes)];
}

/** The limits of the console's requests, declared in the protos. */
const LIMITS = {
  create: {
    name: constraintsOf('botplatform.v1.CreateApplicationRequest', 'name'),
    username: constraintsOf('botplatform.v1.CreateApplicationRequest', 'username'),
    description: constraintsOf('botplatform.v1.CreateApplicationRequest', 'description'),
    avatar: constraintsOf('botplatform.v1.CreateApplicationRequest', 'avatar'),
  },
  application: {
    name: constraintsOf('botplatform.v1.ApplicationFields', 'name'),
    username: constraintsOf('botplatform.v1.ApplicationFields', 'username'),
    description: constraintsOf('botplatform.v1.ApplicationFields', 'description'),
    avatar: constraintsOf('botplatform.v1.ApplicationFields', 'avatar'),
  },
  list: {
    page: constraintsOf('botplatform.v1.ListMyBotsRequest', 'page'),
    limit: constraintsOf('botplatform.v1.ListMyBotsRequest', 'limit'),
  },
  profile: {
    name: constraintsOf('botplatform.v1.BotProfile', 'name'),
    description: constraintsOf('botplatform.v1.BotProfile', 'description'),
    avatar: constraintsOf('botplatform.v1.BotProfile', 'avatar'),
    shortDescription: constraintsOf('botplatform.v1.BotProfile', 'short_description'),
    about: constraintsOf('botplatform.v1.BotProfile', 'about'),
    coverUrl: constraintsOf('botplatform.v1.BotProfile', 'cover_url'),
    links: constraintsOf('botplatform.v1.BotProfile', 'links'),
    commandMenu: constraintsOf('botplatform.v1.BotProfile', 'command_menu'),
  },
  link: {
    title: constraintsOf('botplatform.v1.BotLink', 'title'),
    url: constraintsOf('botplatform.v1.BotLink', 'url'),
  },
  contact: {
    email: constraintsOf('botplatform.v1.BotContact', 'email'),
    url: constraintsOf('botplatform.v1.BotContact', 'url'),
    note: constraintsOf('botplatform.v1.BotContact', 'note'),
  },
  command: {
    command: constraintsOf('botplatform.v1.BotCommand', 'command'),
    description: constraintsOf('botplatform.v1.BotCommand', 'description'),
  },
};

function checkLinks(v: check.Violations, links: BotLink[]): void {
  check.maxItems(v, 'links', links, LIMITS.profile.links);
  links.forEach((l, i) => {
    check.requiredText(v, `links[${i}].title`, l.title, LIMITS.link.title);
    if (!l.url) v.add(`links[${i}].url`, 'REQUIRED', 'is required');
    else check.httpsUrl(v, `links[${i}].url`, l.url, LIMITS.link.url);
  });
}

function checkContact(v: check.Violations, c: BotContact): void {
  if (c.email === undefined && c.url === undefined && c.note === undefined) {
    v.add('contact', 'REQUIRED', 'needs at least one of email, url, note');
  }
  check.email(v, 'contact.email', c.email, LIMITS.contact.email);
  check.httpsUrl(v, 'contact.url', c.url, LIMITS.contact.url);
  check.optionalText(v, 'contact.note', c.note, LIMITS.contact.note);
}

/**
 * A command menu: at most `limits.maxItems` commands (BotProfile.command_menu,
 * SetMyCommandsRequest.commands), each command unique.
 */
export function checkCommands(v: check.Violations, menu: BotCommand[], limits: { readonly maxItems: number }, field = 'command_menu'): void {
  check.maxItems(v, field, menu, limits);
  const seen = new Set<string>();
  menu.forEach((c, i) => {
    const valid = check.token(v, `${field}[${i}].command`, c.command, LIMITS.command.command, 'of a-z, 0-9 and underscore');
    if (valid && seen.has(c.command)) v.add(`${field}[${i}].command`, 'DUPLICATE', 'must be unique');
    seen.add(c.command);
    check.requiredText(v, `${field}[${i}].description`, c.description, LIMITS.command.description);
  });
}

/** Profile fields by their proto (and JSON) names, each turning a BotProfile value into a patch entry. */
const PROFILE_FIELDS: Record<string, (p: BotProfile, v: check.Violations) => BotProfilePatch> = {
  name: (p, v) => {
    check.requiredText(v, 'name', p.name, LIMITS.profile.name);
    return { name: p.name };
  },
  description: (p, v) => {
    check.optionalText(v, 'description', p.description, LIMITS.profile.description);
    return { description: p.description ?? null };
  },
  avatar: (p, v) => {
    check.httpsUrl(v, 'avatar', p.avatar, LIMITS.profile.avatar);
    return { avatar: p.avatar ?? null };
  },
  short_description: (p, v) => {
    check.optionalText(v, 'short_description', p.shortDescription, LIMITS.profile.shortDescription);
    return { shortDescription: p.shortDescription ?? null };
  },
  about: (p, v) => {
    check.optionalText(v, 'about', p.about, LIMITS.profile.about);
    return { about: p.about ?? null };
  },
  cover_url: (p, v) => {
    check.httpsUrl(v, 'cover_url', p.coverUrl, LIMITS.profile.coverUrl);
    return { coverUrl: p.coverUrl ?? null };
  },
  links: (p, v) => {
    checkLinks(v, p.links);
    return { links: p.links.map(({ title, url }) => ({ title, url })) };
  },
  contact: (p, v) => {
    if (p.contact) checkContact(v, p.contact);
    const c = p.contact;
    return { contact: c ? JSON.parse(JSON.stringify({ email: c.email, url: c.url, note: c.note })) : null };
  },
  supports_inline_queries: (p) => ({ supportsInlineQueries: p.supportsInlineQueries ?? false }),
  friend_request_mode: (p, v) => {
    const mode = p.friendRequestMode ?? FriendRequestMode.FRIEND_REQUEST_MODE_UNSPECIFIED;
    const name = friendRequestModeName(mode);
    if (mode !== FriendRequestMode.FRIEND_REQUEST_MODE_UNSPECIFIED && !name) {
      v.add('friend_request_mode', 'INVALID_VALUE', 'must be auto_accept, manual or disabled');
    }
    return { friendRequestMode: name ?? null };
  },
  group_privacy: (p) => ({ groupPrivacy: p.groupPrivacy ?? true }),
  can_join_groups: (p) => ({ canJoinGroups: p.canJoinGroups ?? true }),
  command_menu: (p, v) => {
    checkCommands(v, p.commandMenu, LIMITS.profile.commandMenu);
    return { commandMenu: p.commandMenu.map(({ command, description }) => ({ command, description })) };
  },
};

/** Accepts a mask path in proto spelling ("short_description") or camelCase ("shortDescription"). */
const normalisePath = (path: string) => path.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

export function createConsoleService(
  deps: ConsoleDeps,
): Pick<ConsoleRpc, 'createApplication' | 'listMyBots' | 'getMyBot' | 'updateMyBot' | 'regenerateToken' | 'editApplication' | 'resubmitApplication' | 'deleteBot'> {
  const now = deps.now ?? Date.now;
  const own = createOwnBots(deps.bots);

  /** A username another owner's deleted bot still holds: ALREADY_EXISTS, saying until when. */
  async function refuseReserved(username: string, ownerId: string) {
    const until = await deps.bots.usernameReserved(username, ownerId, now());
    if (until === null) return;
    const description = `is reserved until ${new Date(until).toISOString()} (a deleted bot had it)`;
    throw new ApiError(Code.ALREADY_EXISTS, `username: ${description}`, { details: [{ field: 'username', reason: 'RESERVED', description }] });
  }
  const usernameTaken = (err: unknown) => (err instanceof Conflict && err.key === 'username'
    ? new ApiError(Code.ALREADY_EXISTS, 'username: is already taken', {
      details: [{ field: 'username', reason: 'ALREADY_TAKEN', description: 'is already taken' }],
    })
    : err);

  return {
    async createApplication(req, { principal }) {
      const v = new check.Violations();
      check.requiredText(v, 'name', req.name, LIMITS.create.name);
      check.username(v, 'username', req.username, LIMITS.create.username);
      check.optionalText(v, 'description', req.description, LIMITS.create.description);
      check.httpsUrl(v, 'avatar', req.avatar, LIMITS.create.avatar);
      const scopes = checkScopes(v, req.scopes);
      v.throwIfAny();
      await refuseReserved(req.username, principal.accountId);

      let created: BotRecord;
      try {
        created = await deps.bots.insert({
          id: `bot_${randomBase62(20)}`,
          ownerId: principal.accountId,
          name: req.name,
          username: req.username,
          description: req.description ?? null,
          avatar: req.avatar ?? null,
          scopes,
          now: now(),
        });
      } catch (err) {
        throw usernameTaken(err);
      }
      return { bot: toBotMessage(created) };
    },

    async editApplication(req, { principal }) {
      const fields = req.application ?? ApplicationFields.fromPartial({});
      const v = new check.Violations();
      const patch: ApplicationPatch = {};
      for (const raw of req.updateMask ?? []) {
        const path = normalisePath(raw);
        if (path === 'name') {
          check.requiredText(v, 'name', fields.name, LIMITS.application.name);
          patch.name = fields.name;
        } else if (path === 'username') {
          if (fields.username === undefined) v.add('username', 'REQUIRED', 'is required');
          else check.username(v, 'username', fields.username, LIMITS.application.username);
          patch.username = fields.username;
        } else if (path === 'description') {
          check.optionalText(v, 'description', fields.description, LIMITS.application.description);
          patch.description = fields.description ?? null;
        } else if (path === 'avatar') {
          check.httpsUrl(v, 'avatar', fields.avatar, LIMITS.application.avatar);
          patch.avatar = fields.avatar ?? null;
        } else if (path === 'scopes') {
          // Named, the list means what it says: it cannot be empty.
          if (fields.scopes.length === 0) v.add('scopes', 'REQUIRED', `needs at least one of ${SCOPES.join(', ')}`);
          else patch.scopes = checkScopes(v, fields.scopes);
        } else v.add(raw, 'UNKNOWN_FIELD', 'is not a field of an application');
      }
      v.throwIfAny();
      const bot = await own.find(principal.accountId, req.id);
      if (bot.reviewStatus === 'approved') throw ApiError.failedPrecondition('the bot is approved: change its profile (PATCH /api/v1/bots/my/{id}) instead');
      if (patch.username !== undefined && patch.username !== bot.username) await refuseReserved(patch.username, principal.accountId);
      try {
        if (!(await deps.bots.editApplication(principal.accountId, bot.id, patch, now()))) throw await own.refusal(principal.accountId, bot.id);
      } catch (err) {
        throw usernameTaken(err);
      }
      return { bot: toBotMessage((await deps.bots.findForOwner(principal.accountId, bot.id))!) };
    },

    async resubmitApplication(req, { principal }) {
      const bot = await own.find(principal.accountId, req.id);
      if (bot.reviewStatus !== 'rejected') throw ApiError.failedPrecondition(`only a rejected application can be resubmitted (this one is ${bot.reviewStatus})`);
      if (!(await deps.bots.resubmit(principal.accountId, bot.id, now()))) throw await own.refusal(principal.accountId, bot.id);
      return { bot: toBotMessage((await deps.bots.findForOwner(principal.accountId, bot.id))!) };
    },

    async deleteBot(req, { principal }) {
      const bot = await own.find(principal.accountId, req.id);
      const at = now();
      const purgeAt = at + (deps.deletedBotRetentionMs ?? 30 * 86_400_000);
      const reserved = bot.reviewStatus === 'approved';
      if (!(await deps.units!.deleteBot(principal.accountId, { id: bot.id, username: bot.username, reserved }, at, purgeAt))) {
        throw ApiError.notFound('bot');
      }
      // Its token is refused from the commit on; what every instance kept of it goes too.
      await deps.credentialsChanged?.(bot.id);
      return { id: bot.id, dataRemovedAt: new Date(purgeAt), usernameReleasedAt: new Date(reserved ? purgeAt : at) };
    },

    async listMyBots(req, { principal }) {
      const { page, limit } = check.pageAndLimit(req.page, req.limit, LIMITS.list);
      const found = await deps.bots.listForOwner(principal.accountId, page, limit);
      const hooked = found.items.filter((b) => b.deliveryMode === 'webhook').map((b) => b.id);
      const disabled = hooked.length > 0 && deps.disabledWebhooks ? await deps.disabledWebhooks(hooked) : new Set<string>();
      return paged({ page, limit }, found, (b) => toBotMessage(b, { webhookDisabled: disabled.has(b.id) }));
    },

    async getMyBot(req, { principal }) {
      const bot = await own.find(principal.accountId, req.id);
      let oneTimeToken: string | undefined;
      const sealed = bot.oneTimeTokenSealed;
      if (sealed && (bot.oneTimeTokenExpiresAt ?? 0) > now()) {
        // Only the read that clears it shows it: two concurrent reads cannot both see the token.
        if (await deps.bots.claimOneTimeToken(principal.accountId, bot.id, sealed)) {
          oneTimeToken = deps.secretBox.open(sealed);
        }
      }
      // A bot has a webhook only in webhook mode (set and removed with it, in one unit), as listMyBots reads.
      const webhook = bot.deliveryMode === 'webhook' ? await deps.webhookOf(bot.id) : undefined;
      return { bot: { ...toBotMessage(bot, { oneTimeToken, webhookDisabled: webhook?.disabled ?? false }), webhook } };
    },

    async updateMyBot(req, { principal }) {
      const bot = await own.find(principal.accountId, req.id);
      const profile: BotProfile = req.bot ?? BotProfile.fromPartial({});
      const v = new check.Violations();
      let patch: BotProfilePatch = {};
      for (const raw of req.updateMask ?? []) {
        const path = normalisePath(raw);
        if (path === 'username') v.add('username', 'IMMUTABLE', 'cannot be changed after creation');
        else if (!PROFILE_FIELDS[path]) v.add(raw, 'UNKNOWN_FIELD', 'is not an updatable field');
        else patch = { ...patch, ...PROFILE_FIELDS[path]!(profile, v) };
      }
      v.throwIfAny();
      if (bot.reviewStatus !== 'approved') throw notApproved(bot.reviewStatus);
      if (Object.keys(patch).length > 0 && !(await deps.bots.updateProfile(principal.accountId, bot.id, patch, now()))) {
        throw await own.refusal(principal.accountId, bot.id);
      }
      // getMe answers from kept principals: drop them here and on every instance.
      if (Object.keys(patch).length > 0) await deps.credentialsChanged?.(bot.id);
      return { bot: toBotMessage((await deps.bots.findForOwner(principal.accountId, bot.id))!) };
    },

    async regenerateToken(req, { principal }) {
      const bot = await own.approved(principal.accountId, req.id);
      const { plaintext, issued } = issueToken(deps, now(), false);
      if (!(await deps.bots.replaceToken(principal.accountId, bot.id, issued, now()))) {
        throw await own.refusal(principal.accountId, bot.id);
      }
      await deps.credentialsChanged?.(bot.id);
      return { botId: bot.id, oneTimeToken: plaintext, tokenPrefix: issued.prefix, telegramToken: telegramToken(bot.id, plaintext) };
    },
  };
}

export type ConsoleService = ReturnType<typeof createConsoleService>;
export type { Bot };
