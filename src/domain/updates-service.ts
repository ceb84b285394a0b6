/**
 * Updates: ingest (internal services and the console's test updates), getUpdates
 * with long polling, and the delivery mode (webhook configuration).
 */
import type { AccountPrincipal } from '../auth/account-jwt.js';
import type { SecretBox } from '../auth/secret-box.js';
import { randomBase62 } from '../auth/bot-token.js';
import { ApiError, Code } from '../errors.js';
import { constraintsOf } from '../gen/constraints.js';
import type { WebhookSummary } from '../gen/botplatform/v1/bot.js';
import { IncomingUpdate, type IngestUpdatesRequest, type IngestUpdatesResponse } from '../gen/botplatform/v1/internal_service.js';
import type { Update, WebhookInfo } from '../gen/botplatform/v1/update.js';
import type { GetUpdatesRequest } from '../gen/botplatform/v1/runtime_service.js';
import { checkTarget, DEFAULT_WEBHOOK_PORTS, isValidIpOrCidr, type Cidr, type Lookup } from '../net/ssrf.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import { toBotMessage } from './bot-view.js';
import { SURFACE_METADATA, type CallSignal, type ConsoleRpc, type InternalRpc, type RuntimeRpc } from './rpc.js';
import type { UsageRecorder } from './usage.js';
import type { StoredUpdate, UpdatesRepo } from '../storage/updates-repo.js';
import { createIngestStream } from './ingest-stream.js';
import { createOwnBots, NOT_APPROVED } from './own-bot.js';
import type { IngestOutcome, NewUpdate, UnitsOfWork } from '../storage/units.js';
import type { WebhooksRepo } from '../storage/webhooks-repo.js';
import type { Claim, Parked, UpdateWaiters } from '../pipeline/update-waiters.js';
import { webhookActive } from '../pipeline/update-waiters.js';
import type { UpdateWriter } from '../pipeline/update-writer.js';
import * as check from './validation.js';
import { incomingEntities } from '../messages/formatted.js';
import { toUpdateMessage, toWireMessage, UPDATE_KINDS } from '../wire.js';
import { checkShapes, prepareIncoming, type IncomingDeps } from './incoming.js';

export interface UpdatesDeps extends IncomingDeps {
  bots: BotsRepo;
  updates: UpdatesRepo;
  webhooks: WebhooksRepo;
  /** Setting and removing a webhook (with the bot's mode and queued updates). */
  units: Pick<UnitsOfWork, 'setWebhook' | 'removeWebhook'>;
  waiters: UpdateWaiters;
  writer: UpdateWriter;
  secretBox: SecretBox;
  allowedCidrs: Cidr[];
  /** WEBHOOK_ALLOWED_PORTS (Telegram's ports by default). */
  allowedPorts?: number[];
  egressIps: string[];
  lookup?: Lookup;
  /** Open (pending or retrying) deliveries of a bot. */
  openDeliveries: (botId: string) => Promise<number>;
  /** Told how many updates each getUpdates hands out (the console's usage statistics). */
  usage?: Pick<UsageRecorder, 'delivered'>;
  now?: () => number;
}

/** The webhook settings shared by the console and runtime methods. */
export interface WebhookInput {
  url: string;
  secretToken: string;
  allowedUpdates: string[];
  allowedIps: string[];
  maxConnections?: number;
  /** Most attempts per second; absent: no limit. */
  maxDeliveriesPerSecond?: number;
  dropPendingUpdates: boolean;
}

/** The limits of the webhook, polling, test-update and ingest requests, declared in the protos. */
const LIMITS = {
  /** The runtime's setWebhook and the console's webhook: each request declares its own. */
  webhook: webhookLimits('botplatform.v1.SetWebhookRequest'),
  consoleWebhook: webhookLimits('botplatform.v1.SetBotWebhookRequest'),
  getUpdates: {
    offset: constraintsOf('botplatform.v1.GetUpdatesRequest', 'offset'),
    tail: constraintsOf('botplatform.v1.GetUpdatesRequest', 'tail'),
    limit: constraintsOf('botplatform.v1.GetUpdatesRequest', 'limit'),
    timeout: constraintsOf('botplatform.v1.GetUpdatesRequest', 'timeout'),
  },
  testUpdate: { text: constraintsOf('botplatform.v1.CreateTestUpdateRequest', 'text') },
  testCallback: {
    messageId: constraintsOf('botplatform.v1.CreateTestCallbackQueryRequest', 'message_id'),
    callbackData: constraintsOf('botplatform.v1.CreateTestCallbackQueryRequest', 'callback_data'),
  },
  user: {
    username: constraintsOf('botplatform.v1.User', 'username'),
    firstName: constraintsOf('botplatform.v1.User', 'first_name'),
  },
  ingest: {
    updates: constraintsOf('botplatform.v1.IngestUpdatesRequest', 'updates'),
  },
};

type WebhookLimits = ReturnType<typeof webhookLimits>;

/** Length of a secret the service makes for a rotation (base62: about 256 bits). */
const GENERATED_SECRET_LENGTH = 43;
/** A rotation's default overlap: the previous secret stays valid 24 hours (as Svix's does). */
export const DEFAULT_SECRET_OVERLAP_SECONDS = 86_400;
const ROTATE = {
  secretToken: constraintsOf('botplatform.v1.RotateWebhookSecretRequest', 'secret_token'),
  overlap: constraintsOf('botplatform.v1.RotateWebhookSecretRequest', 'overlap_seconds'),
};

/** The console's test chat (a private chat with the test user), when a test tool names none. */
const TEST_CHAT = 100_000_001;
const testUser = (chatId: number) => ({ id: chatId, isBot: false, username: 'test_user', firstName: 'Test' });

/**
 * Ingest's refusal of a test tool's update, in the console request's own field names
 * (updates[0].callback_query.data → callback_data, ….message.message_id → message_id).
 */
function consoleFields(err: unknown): unknown {
  if (!(err instanceof ApiError) || err.details.length === 0) return err;
  // The message pressed is a resource the request names: one the bot did not send to the chat is not found.
  if (err.details[0]!.reason === 'MESSAGE_NOT_FOUND') return new ApiError(Code.NOT_FOUND, 'message not found: the bot sent no such message to the chat');
  const rename = (f: string) => (/\.data$/.test(f) ? 'callback_data' : /message_id$/.test(f) ? 'message_id' : f);
  const details = err.details.map((d) => ({ ...d, field: rename(d.field) }));
  return ApiError.invalid(details[0]!.field, details[0]!.reason, details[0]!.description);
}

function webhookLimits(message: 'botplatform.v1.SetWebhookRequest' | 'botplatform.v1.SetBotWebhookRequest') {
  return {
    url: constraintsOf(message, 'url'),
    // Both declare 256 of the same characters; a secret, when given, has at least one.
    secretToken: { ...constraintsOf(message, 'secret_token'), minLength: 1 },
    allowedIps: constraintsOf(message, 'allowed_ips'),
    maxConnections: constraintsOf(message, 'max_connections'),
    maxDeliveriesPerSecond: constraintsOf(message, 'max_deliveries_per_second'),
  };
}

function checkKinds(v: check.Violations, field: string, kinds: string[]) {
  kinds.forEach((k, i) => {
    if (!(UPDATE_KINDS as readonly string[]).includes(k)) v.add(`${field}[${i}]`, 'INVALID_VALUE', `must be one of ${UPDATE_KINDS.join(', ')}`);
  });
}

type UpdatesRpc = Pick<RuntimeRpc, 'getUpdates' | 'setWebhook' | 'deleteWebhook' | 'getWebhookInfo'>
  & Pick<ConsoleRpc, 'setBotWebhook' | 'rotateWebhookSecret' | 'deleteBotWebhook' | 'enableBotWebhook' | 'createTestUpdate' | 'createTestCallbackQuery'>
  & Pick<InternalRpc, 'ingestUpdates' | 'streamIngestUpdates'>;

export function createUpdatesService(deps: UpdatesDeps): UpdatesRpc & {
  webhookSummary(botId: string): Promise<WebhookSummary | undefined>;
} {
  const now = deps.now ?? Date.now;

  const own = createOwnBots(deps.bots);
  /** A round that skipped its read. */
  const NO_ROWS: StoredUpdate[] = [];

  /**
   * One getUpdates call, from its claim to its answer. Its reads run as the call's own
   * steps; while it waits it is this record, parked on its claim (no suspended async
   * frame: a process holds its long polls by the ten thousand).
   */
  class Poll implements Parked {
    private offset = 0;
    private until = 0;
    /** Whether a read may find something (the first read is skipped when the bot row says nothing is there). */
    private mayHave = true;

    constructor(
      private readonly waiter: Claim,
      private readonly limit: number,
      private readonly timeoutMs: number,
      private readonly signal: CallSignal,
      private readonly resolve: (response: { result: Update[] }) => void,
      private readonly reject: (err: unknown) => void,
    ) {}

    begin(req: GetUpdatesRequest) {
      this.prepare(req).then(() => this.round(), (err) => this.failed(err));
    }

    /**
     * What the call asked, applied: one cheap read of the bot row (its delivery mode and
     * newest update_seq), after the claim, so what it does not show yet marks the waiter
     * dirty; allowed_updates kept, and the updates before the offset confirmed.
     */
    private async prepare(req: GetUpdatesRequest): Promise<void> {
      const botId = this.waiter.botId;
      let offset = req.offset ?? 0;
      const state = (await deps.bots.pollingState(botId))!;
      if (state.deliveryMode === 'webhook') throw webhookActive();
      if (req.allowedUpdates.length > 0) await deps.bots.setAllowedUpdates(botId, [...new Set(req.allowedUpdates)]);
      if (req.tail !== undefined) {
        // Telegram's negative offset: the newest `tail`, everything before them confirmed.
        offset = Math.max(1, state.lastUpdateSeq + 1 - req.tail);
        await deps.updates.confirmBelow(botId, offset);
      } else if (offset > 1) {
        const last = state.lastUpdateSeq;
        if (offset > last + 1) {
          throw ApiError.invalid('offset', 'OUT_OF_RANGE', `is past the newest update (update_seq ${last}); use at most ${last + 1}`);
        }
        await deps.updates.confirmBelow(botId, offset);
      }
      this.offset = offset;
      this.until = now() + this.timeoutMs;
      // Nothing at or past the offset yet (the bot row's newest update_seq says so):
      // the first read is skipped, and a commit since the state read wakes the waiter.
      this.mayHave = Math.max(offset, 1) <= state.lastUpdateSeq;
    }

    /**
     * Reads what may have arrived, then answers or parks. `woken`: after a wait, woken by
     * an arrival: answered from what the arrivals carried when they hold the updates from
     * the offset on (Claim.takeArrived: committed, as the read would find them), else its
     * read goes out at once (an urgent read), not after the event loop's turn.
     */
    private round(woken = false) {
      const arrived = woken ? this.waiter.takeArrived(this.offset, this.limit) : undefined;
      if (arrived) return this.found(arrived);
      const mayHave = this.waiter.takeDirty() || this.mayHave;
      this.mayHave = true;
      if (!mayHave) return this.found(NO_ROWS);
      deps.updates.read(this.waiter.botId, this.offset, this.limit, undefined, woken).then((rows) => this.found(rows), (err) => this.failed(err));
    }

    private found(rows: StoredUpdate[]) {
      try {
        if (rows.length > 0 || this.timeoutMs === 0 || now() >= this.until) {
          deps.usage?.delivered(this.waiter.botId, rows.length);
          this.answer(rows.map(toUpdateMessage));
        } else this.waiter.park(this.until, this.signal, this);
      } catch (err) {
        this.failed(err);
      }
    }

    /** Its claim's wait ended: woken (something may have arrived: read again), or its time is up. */
    woken(dirty: boolean) {
      if (dirty) this.round(true);
      else this.answer([]);
    }

    private answer(result: Update[]) {
      this.waiter.release();
      this.resolve({ result });
    }

    failed(err: unknown) {
      this.waiter.release();
      this.reject(err);
    }
  }

  function refuseOutcome(o: IngestOutcome, field: string) {
    if ('error' in o) {
      throw o.error === 'NO_BOT'
        ? new ApiError(Code.NOT_FOUND, `${field}: no such bot`, { details: [{ field, reason: 'NOT_FOUND', description: 'no such bot' }] })
        : ApiError.failedPrecondition(`${field}: ${NOT_APPROVED}`);
    }
  }

  /**
   * Sets the bot's webhook. `keepSecret`: a secret left out keeps the webhook's current
   * one (the console's edits); without it (the runtime's setWebhook) one is required.
   */
  async function applyWebhook(botId: string, input: WebhookInput, limits: WebhookLimits, secretHeader = false, keepSecret = false): Promise<void> {
    const v = new check.Violations();
    if (!input.url) v.add('url', 'REQUIRED', 'is required');
    else check.httpsUrl(v, 'url', input.url, limits.url);
    const current = !input.secretToken && keepSecret ? await deps.webhooks.get(botId) : undefined;
    if (!input.secretToken && !current) {
      v.add('secret_token', 'REQUIRED', keepSecret ? 'is required for a new webhook (an edit may leave it out to keep the current one)' : 'is required for signed delivery');
    } else if (input.secretToken) check.token(v, 'secret_token', input.secretToken, limits.secretToken, 'of A-Z a-z 0-9 _ -');
    checkKinds(v, 'allowed_updates', input.allowedUpdates);
    check.maxItems(v, 'allowed_ips', input.allowedIps, limits.allowedIps);
    input.allowedIps.forEach((ip, i) => {
      if (!isValidIpOrCidr(ip)) v.add(`allowed_ips[${i}]`, 'INVALID_FORMAT', 'must be an IP address or CIDR range');
    });
    const max = input.maxConnections ?? 40;
    check.inRange(v, 'max_connections', max, limits.maxConnections);
    const perSecond = input.maxDeliveriesPerSecond ?? null;
    check.inRange(v, 'max_deliveries_per_second', perSecond, limits.maxDeliveriesPerSecond);
    v.throwIfAny();
    const policy = { allowedCidrs: deps.allowedCidrs, allowedPorts: deps.allowedPorts ?? DEFAULT_WEBHOOK_PORTS };
    const target = await checkTarget(new URL(input.url), policy, deps.lookup);
    if (target.refusal) throw ApiError.invalid('url', 'FORBIDDEN_TARGET', `is not an allowed webhook target (${target.refusal})`);

    const kinds = input.allowedUpdates.length > 0 ? [...new Set(input.allowedUpdates)] : null;
    await deps.units.setWebhook(botId, {
      url: input.url,
      secretSealed: current ? current.secretSealed : deps.secretBox.seal(input.secretToken),
      keepSecret: Boolean(current),
      allowedIps: input.allowedIps,
      secretHeader: current ? current.secretHeader : secretHeader,
      maxConnections: max,
      maxDeliveriesPerSecond: perSecond,
      allowedUpdates: kinds,
    }, input.dropPendingUpdates, now());
    await deps.waiters.modeChanged(botId, 'webhook');
  }

  async function removeWebhook(botId: string, dropPending: boolean): Promise<void> {
    await deps.units.removeWebhook(botId, dropPending, now());
    await deps.waiters.modeChanged(botId, 'polling');
  }

  /** The redacted webhook of a bot, for detail reads. */
  async function webhookSummary(botId: string): Promise<WebhookSummary | undefined> {
    const w = await deps.webhooks.get(botId);
    if (!w) return undefined;
    const kinds = await deps.bots.allowedUpdates(botId);
    return {
      url: w.url,
      hasSecretToken: true,
      allowedUpdates: kinds ?? [],
      allowedIps: w.allowedIps,
      maxConnections: w.maxConnections,
      maxDeliveriesPerSecond: w.maxDeliveriesPerSecond ?? undefined,
      disabled: w.disabledAt !== null,
      disabledReason: w.disabledReason ?? undefined,
      disabledAt: w.disabledAt === null ? undefined : new Date(w.disabledAt),
      previousSecretExpiresAt: w.previousSecretSealed !== null && w.previousSecretUntil !== null && w.previousSecretUntil > now()
        ? new Date(w.previousSecretUntil) : undefined,
    };
  }

  /** The console's detail of an own bot as it stands now (the one-time token stays unread). */
  async function ownBotDetail(principal: AccountPrincipal, id: string) {
    const bot = await own.find(principal.accountId, id);
    const webhook = await webhookSummary(bot.id);
    return { ...toBotMessage(bot, { webhookDisabled: webhook?.disabled ?? false }), webhook };
  }

  /** Unknown or unapproved bots refuse the whole request (the first such update names it); else the bots' ingest states. */
  const refuseUnknownBots = async (req: IngestUpdatesRequest) => {
    const bots = await deps.bots.ingestStateOf(req.updates.map((u) => u.botId));
    for (const [i, u] of req.updates.entries()) {
      const bot = bots.get(u.botId);
      if (!bot) refuseOutcome({ error: 'NO_BOT' }, `updates[${i}].bot_id`);
      else if (bot.reviewStatus !== 'approved') refuseOutcome({ error: 'NOT_APPROVED' }, `updates[${i}].bot_id`);
    }
    return bots;
  };

  /**
   * Internal ingest, first step: the request checked whole (unknown or unapproved bots
   * refuse it whole, and nothing of it is written), and what the writer is to store,
   * each update tagged with its request (the writer stores a request all or none).
   */
  const checkIngest = async (req: IngestUpdatesRequest): Promise<NewUpdate[]> => {
    const v = new check.Violations();
    if (req.updates.length === 0) v.add('updates', 'REQUIRED', 'needs at least one update');
    check.maxItems(v, 'updates', req.updates, LIMITS.ingest.updates, 'updates');
    checkShapes(v, req.updates);
    v.throwIfAny();
    const at = Math.floor(now() / 1000);
    let items: NewUpdate[];
    if (req.updates.every((u) => u.message && !u.message.replyToMessageId)) {
      // New messages replying to nothing (the common case) are prepared without reading
      // anything: their bots are checked by the writer's transaction, which locks their rows
      // anyway and refuses the request whole, not by a read of its own before it (a round
      // trip on MySQL). A request refused for its updates' shapes is still refused for its
      // bots first, as when they were read first.
      try {
        items = await prepareIncoming(deps, req.updates, () => false, at);
      } catch (err) {
        await refuseUnknownBots(req);
        throw err;
      }
    } else {
      const bots = await refuseUnknownBots(req);
      items = await prepareIncoming(deps, req.updates, (botId) => bots.get(botId)!.supportsInlineQueries, at);
    }
    for (const item of items) item.request = req;
    return items;
  };

  /**
   * Second step: the checked updates handed to the writer (queued in its group commit at
   * once, in call order) and answered once committed; a request with an update of an
   * unknown or unapproved bot is refused whole (nothing of it was stored).
   */
  const writeIngest = async (items: NewUpdate[]): Promise<IngestUpdatesResponse> => {
    const outcomes = await deps.writer.write(items);
    const refused = outcomes.findIndex((o) => 'error' in o);
    if (refused >= 0) refuseOutcome(outcomes[refused]!, `updates[${refused}].bot_id`);
    return {
      results: outcomes.map((o) => {
        if ('ok' in o) return { updateId: o.ok.updateId, updateSeq: o.ok.updateSeq, filtered: false, duplicate: false };
        if ('duplicate' in o) return { updateId: o.duplicate.updateId, updateSeq: o.duplicate.updateSeq, filtered: false, duplicate: true };
        if ('filtered' in o) return { updateId: 0, updateSeq: 0, filtered: true, duplicate: false };
        throw new Error(`ingest outcome ${JSON.stringify(o)} in a request not refused`);
      }),
    };
  };

  /** Internal ingest: validated whole, committed whole (or refused whole) before it answers. */
  const ingestUpdates: InternalRpc['ingestUpdates'] = async (req) => writeIngest(await checkIngest(req));

  return {
    webhookSummary,
    ingestUpdates,
    /** The same ingest, batch by batch over one stream (ingest-stream.ts). */
    streamIngestUpdates: createIngestStream(checkIngest, writeIngest),

    /** The console's test message from a test user to an approved bot. */
    async createTestUpdate(req, { principal }) {
      const bot = await own.approved(principal.accountId, req.id);
      const v = new check.Violations();
      check.messageText(v, 'text', req.text, LIMITS.testUpdate.text);
      if (req.chatId !== undefined && req.chatId === 0) v.add('chat_id', 'INVALID_VALUE', 'must not be 0');
      if (req.from && !req.from.id) v.add('from.id', 'REQUIRED', 'is required');
      check.optionalText(v, 'from.username', req.from?.username, LIMITS.user.username);
      check.optionalText(v, 'from.first_name', req.from?.firstName, LIMITS.user.firstName);
      v.throwIfAny();
      const chatId = req.chatId ?? TEST_CHAT;
      const from = req.from ?? testUser(chatId);
      const [outcome] = await deps.writer.write([{
        botId: bot.id,
        kind: 'message',
        message: toWireMessage({
          messageId: 0, date: Math.floor(now() / 1000), chat: { id: chatId, type: 'private' }, from, text: req.text, replyToMessageId: undefined, photo: undefined, document: undefined,
          entities: incomingEntities(req.text, [], 'text'), captionEntities: [], replyMarkup: undefined, replyToMessage: undefined, forwardOrigin: undefined,
        }),
      }]);
      if ('filtered' in outcome!) throw ApiError.failedPrecondition("the bot's allowed_updates do not include message");
      refuseOutcome(outcome!, 'id');
      const { updateId, updateSeq } = (outcome as { ok: { updateId: number; updateSeq: number } }).ok;
      return { updateId, updateSeq };
    },

    /**
     * The console's press of a callback button of a message the bot sent to a test chat,
     * by the test user: a callback_query update as a messaging service would ingest it.
     */
    async createTestCallbackQuery(req, { principal }) {
      const bot = await own.approved(principal.accountId, req.id);
      const v = new check.Violations();
      if (req.chatId !== undefined && req.chatId === 0) v.add('chat_id', 'INVALID_VALUE', 'must not be 0');
      check.inRange(v, 'message_id', req.messageId, LIMITS.testCallback.messageId);
      check.optionalText(v, 'callback_data', req.callbackData, LIMITS.testCallback.callbackData);
      if (!req.callbackData) v.add('callback_data', 'REQUIRED', 'is required');
      v.throwIfAny();
      const chatId = req.chatId ?? TEST_CHAT;
      const update = IncomingUpdate.fromPartial({
        botId: bot.id,
        callbackQuery: { from: testUser(chatId), message: { messageId: req.messageId, chat: { id: chatId, type: 'private' } }, data: req.callbackData },
      });
      let items: NewUpdate[];
      try {
        items = await prepareIncoming(deps, [update], () => bot.supportsInlineQueries, Math.floor(now() / 1000));
      } catch (err) {
        throw consoleFields(err);
      }
      const [outcome] = await deps.writer.write(items);
      if ('filtered' in outcome!) throw ApiError.failedPrecondition("the bot's allowed_updates do not include callback_query");
      refuseOutcome(outcome!, 'id');
      const { updateId, updateSeq } = (outcome as { ok: { updateId: number; updateSeq: number } }).ok;
      return { updateId, updateSeq, callbackQueryId: items[0]!.query!.id };
    },

    getUpdates(req, { principal, signal }) {
      const v = new check.Violations();
      const limits = LIMITS.getUpdates;
      check.inRange(v, 'offset', req.offset, limits.offset);
      check.inRange(v, 'tail', req.tail, limits.tail);
      if (req.tail !== undefined && req.offset !== undefined) v.add('tail', 'CONFLICT', `cannot be given with ${limits.tail.conflictsWith}`);
      check.inRange(v, 'limit', req.limit, limits.limit);
      check.inRange(v, 'timeout', req.timeout, limits.timeout);
      checkKinds(v, 'allowed_updates', req.allowedUpdates);
      // A throw in the executor rejects the call (its violations, or a claim refused at shutdown).
      return new Promise<{ result: Update[] }>((resolve, reject) => {
        v.throwIfAny();
        // Newest call wins: claim before reading, so an update committed meanwhile wakes us.
        const poll = new Poll(deps.waiters.claim(principal.botId, true), req.limit ?? 100, (req.timeout ?? 0) * 1000, signal, resolve, reject);
        poll.begin(req);
      });
    },

    async setWebhook(req, { principal, metadata }) {
      await applyWebhook(principal.botId, req, LIMITS.webhook, metadata[SURFACE_METADATA] === 'telegram');
      return { result: true };
    },

    async deleteWebhook(req, { principal }) {
      await removeWebhook(principal.botId, req.dropPendingUpdates);
      return { result: true };
    },

    async setBotWebhook(req, { principal }) {
      const bot = await own.approved(principal.accountId, req.id);
      await applyWebhook(bot.id, req, LIMITS.consoleWebhook, false, true);
      return { bot: await ownBotDetail(principal, bot.id) };
    },

    /** A new signing secret; the previous one signs too until the overlap ends. */
    async rotateWebhookSecret(req, { principal }) {
      const v = new check.Violations();
      if (req.secretToken) check.token(v, 'secret_token', req.secretToken, { ...ROTATE.secretToken, minLength: 1 }, 'of A-Z a-z 0-9 _ -');
      const overlap = req.overlapSeconds ?? DEFAULT_SECRET_OVERLAP_SECONDS;
      check.inRange(v, 'overlap_seconds', overlap, ROTATE.overlap);
      v.throwIfAny();
      const bot = await own.approved(principal.accountId, req.id);
      const secret = req.secretToken || randomBase62(GENERATED_SECRET_LENGTH);
      const at = now();
      if (!(await deps.webhooks.rotateSecret(bot.id, deps.secretBox.seal(secret), overlap > 0 ? at + overlap * 1000 : null, at))) {
        throw ApiError.failedPrecondition('the bot has no webhook set');
      }
      return { bot: await ownBotDetail(principal, bot.id), secretToken: secret };
    },

    async deleteBotWebhook(req, { principal }) {
      const bot = await own.approved(principal.accountId, req.id);
      await removeWebhook(bot.id, req.dropPendingUpdates);
      return { bot: await ownBotDetail(principal, bot.id) };
    },

    /** Resumes deliveries to a webhook disabled for failing too long. */
    async enableBotWebhook(req, { principal }) {
      const bot = await own.approved(principal.accountId, req.id);
      if (!(await deps.webhooks.enable(bot.id))) throw ApiError.failedPrecondition('the bot has no webhook set');
      return { bot: await ownBotDetail(principal, bot.id) };
    },

    async getWebhookInfo(_req, { principal }) {
      const [bot, webhook] = await Promise.all([
        deps.bots.webhookInfoState(principal.botId),
        deps.webhooks.get(principal.botId),
      ]);
      // Pending: not yet received — by polling, the queue; by webhook, the open deliveries.
      const pending = bot!.deliveryMode === 'webhook'
        ? await deps.openDeliveries(principal.botId)
        : await deps.updates.pendingCount(principal.botId);
      const info: WebhookInfo = {
        url: webhook?.url ?? '',
        deliveryMode: bot!.deliveryMode,
        pendingUpdateCount: pending,
        maxConnections: webhook?.maxConnections ?? 0,
        allowedUpdates: bot!.allowedUpdates ?? [],
        lastErrorDate: webhook?.lastErrorDate ?? undefined,
        lastErrorMessage: webhook?.lastErrorMessage ?? undefined,
        platformEgressIps: deps.egressIps,
        allowedIps: webhook?.allowedIps ?? [],
        maxDeliveriesPerSecond: webhook?.maxDeliveriesPerSecond ?? undefined,
        disabled: Boolean(webhook?.disabledAt),
        disabledReason: webhook?.disabledReason ?? undefined,
        disabledDate: webhook?.disabledAt ? Math.floor(webhook.disabledAt / 1000) : undefined,
      };
      return { result: info };
    },
  };
}

export type UpdatesService = ReturnType<typeof createUpdatesService>;
