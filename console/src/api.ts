/**
 * The console's only way to the service: the public /api/v1 API with the account JWT
 * the user signed in with (kept in sessionStorage, sent only as a Bearer header).
 */

import { tokens } from './tokens';

const KEY = 'botplatform.console.jwt';

export interface FieldError {
  field: string;
  reason: string;
}

/** An API failure: HTTP status, the contract's status name and message, and per-field details. */
export class ApiFailure extends Error {
  constructor(
    readonly http: number,
    readonly status: string,
    message: string,
    readonly details: FieldError[] = [],
  ) {
    super(message);
  }
  /** The message for one field (the API names fields as the request does: "username", "command_menu[0].command"). */
  fieldMessage(field: string): string | undefined {
    const d = this.details.find((x) => x.field === field || x.field === `bot.${field}`);
    if (!d) return undefined;
    // The message words the first violation ("<field>: <description> (and N more)"); the
    // others are known by their reason code.
    if (d === this.details[0]) return this.message.replace(/^[^:]+:\s*/, '').replace(/ \(and \d+ more\)$/, '');
    return REASON_WORDS[d.reason] ?? d.reason.toLowerCase().replace(/_/g, ' ');
  }
}

/** Words for the reason codes of the violations after the first (the API words only the first). */
const REASON_WORDS: Record<string, string> = {
  INVALID_FORMAT: 'is not in the allowed format (see the rules above)',
  REQUIRED: 'is required',
  DUPLICATE: 'must be unique',
  INVALID_LENGTH: 'is too short or too long (see the rules above)',
  OUT_OF_RANGE: 'is out of range (see the rules above)',
  INVALID_VALUE: 'is not one of the allowed values',
};

type Listener = () => void;
const expiredListeners: ((message: string) => void)[] = [];

export const session = {
  get jwt(): string | null {
    return sessionStorage.getItem(KEY);
  },
  signIn(jwt: string) {
    sessionStorage.setItem(KEY, jwt);
  },
  signOut() {
    sessionStorage.removeItem(KEY);
    // Tokens held for another session's bots are not this one's to see.
    tokens.clear();
  },
  /** Called when the API refuses the JWT (expired, revoked, malformed). */
  onExpired(fn: (message: string) => void) {
    expiredListeners.push(fn);
  },
  /**
   * Whether the JWT's `roles` claim names admin, read from its payload (display only: the
   * review queue still asks the API, which decides). A developer's pages then never ask
   * the admin API and never see its 403.
   */
  claimsAdmin(): boolean {
    const jwt = sessionStorage.getItem(KEY);
    try {
      const payload = JSON.parse(atob(jwt!.split('.')[1]!.replace(/-/g, '+').replace(/_/g, '/')));
      return Array.isArray(payload.roles) && payload.roles.includes('admin');
    } catch {
      return false;
    }
  },
  /** Seconds since the epoch when the JWT expires, read from its payload (display only). */
  expiresAt(): number | undefined {
    const jwt = sessionStorage.getItem(KEY);
    try {
      const payload = JSON.parse(atob(jwt!.split('.')[1]!.replace(/-/g, '+').replace(/_/g, '/')));
      return typeof payload.exp === 'number' ? payload.exp : undefined;
    } catch {
      return undefined;
    }
  },
};

export type { Listener };

async function request<T>(method: string, path: string, body?: unknown, jwt = session.jwt): Promise<T> {
  const headers: Record<string, string> = {};
  if (jwt) headers.authorization = `Bearer ${jwt}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch {
    throw new ApiFailure(0, 'UNAVAILABLE', 'the service cannot be reached');
  }
  const text = await res.text();
  let parsed: any = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON
  }
  if (!res.ok) {
    const e = parsed?.error ?? {};
    const failure = new ApiFailure(res.status, e.status ?? String(res.status), e.message ?? `HTTP ${res.status}`, e.details ?? []);
    if (res.status === 401 && jwt && jwt === session.jwt) {
      session.signOut();
      for (const fn of expiredListeners) fn(failure.message);
    }
    throw failure;
  }
  return parsed as T;
}

// The API's types are the SDK's, generated from the protos (sdk/src/generated/api.ts, by
// `npm run generate`): wire names, optional and nullable fields exactly as the API answers.
import type {
  Bot, BotMetrics, BotProfile, CreateApplicationRequest, CreateTestUpdateResponse, Delivery, DeliveryStatus, ListBotsResponse,
  ListDeliveriesResponse, ListMyBotsResponse, RecoverDeliveriesResponse, RegenerateTokenResponse, ReviewStatus, RotateWebhookSecretResponse, ListDeliveryAttemptsResponse, DeleteBotResponse,
  SetBotWebhookRequest, CreateTestCallbackQueryRequest, CreateTestCallbackQueryResponse, ListChatMessagesResponse,
} from '../../sdk/src/generated/api';
export type {
  Bot, BotCommand, BotLink, BotMetrics, CreateApplicationRequest, Delivery, DeliveryStatus, ListBotsResponse, ListDeliveriesResponse,
  ListDeliveryAttemptsResponse,
  ListMyBotsResponse, Pagination, ReviewStatus, InlineKeyboardButton, Message, MessageEntity,
} from '../../sdk/src/generated/api';
const q = (params: Record<string, string | number | undefined>) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') s.set(k, String(v));
  const t = s.toString();
  return t ? `?${t}` : '';
};
const e = encodeURIComponent;

/** A request's body as the API reads it: the request less its path parameters. */
type Body<R, Path extends keyof R> = Omit<R, Path>;
/** SetBotWebhook's body. */
export type WebhookBody = Body<SetBotWebhookRequest, 'id'>;
/** UpdateMyBot's body: the profile fields to change; null (or an empty text) clears one. */
export type ProfilePatch = { [K in keyof BotProfile]?: BotProfile[K] | null };

export const api = {
  /** Checks a JWT before keeping it. */
  probe: (jwt: string) => request<ListMyBotsResponse>('GET', '/api/v1/bots/my?limit=1', undefined, jwt),
  /** Whether the JWT carries the admin role: the review queue answers it, and only it. */
  async isAdmin(): Promise<boolean> {
    try {
      await request('GET', '/api/v1/admin/bots?limit=1');
      return true;
    } catch (err) {
      if (err instanceof ApiFailure && err.http === 403) return false;
      throw err;
    }
  },
  localSignIn: (code: string) => request<{ jwt: string }>('POST', '/console/local-sign-in', { code }, null),
  listBots: (page: number, limit = 20) => request<ListMyBotsResponse>('GET', `/api/v1/bots/my${q({ page, limit })}`),
  createBot: (body: CreateApplicationRequest) => request<Bot>('POST', '/api/v1/bots/applications', body),
  getBot: (id: string) => request<Bot>('GET', `/api/v1/bots/my/${e(id)}`),
  updateBot: (id: string, patch: ProfilePatch) => request<Bot>('PATCH', `/api/v1/bots/my/${e(id)}`, patch),
  /** Changes a pending or rejected application (the keys given). */
  editApplication: (id: string, patch: { name?: string; username?: string; description?: string | null; scopes?: string[] }) =>
    request<Bot>('PATCH', `/api/v1/bots/my/${e(id)}/application`, patch),
  resubmit: (id: string) => request<Bot>('POST', `/api/v1/bots/my/${e(id)}/resubmit`, {}),
  /** Deletes a bot (withdraws a pending application); answers when its data goes and its username is free. */
  deleteBot: (id: string) => request<DeleteBotResponse>('DELETE', `/api/v1/bots/my/${e(id)}`, {}),
  regenerateToken: (id: string) => request<RegenerateTokenResponse>('POST', `/api/v1/bots/my/${e(id)}/regenerate-token`, {}),
  setWebhook: (id: string, body: WebhookBody) => request<Bot>('POST', `/api/v1/bots/my/${e(id)}/webhook`, body),
  /** A new signing secret (made by the service when not given); the previous one stays valid for overlapSeconds. */
  rotateSecret: (id: string, overlapSeconds: number) =>
    request<RotateWebhookSecretResponse>('POST', `/api/v1/bots/my/${e(id)}/webhook/rotate-secret`, { overlap_seconds: overlapSeconds }),
  deleteWebhook: (id: string, drop: boolean) => request<Bot>('DELETE', `/api/v1/bots/my/${e(id)}/webhook`, { drop_pending_updates: drop }),
  deliveries: (id: string, page: number, limit = 20, status: DeliveryStatus | '' = '', more: { update_id?: string; since?: string } = {}) =>
    request<ListDeliveriesResponse>('GET', `/api/v1/bots/my/${e(id)}/deliveries${q({ page, limit, status, ...more })}`),
  /** One delivery's attempts, newest first: the request sent and the answer received. */
  deliveryAttempts: (id: string, deliveryId: string, page = 1, limit = 20) =>
    request<ListDeliveryAttemptsResponse>('GET', `/api/v1/bots/my/${e(id)}/deliveries/${e(deliveryId)}/attempts${q({ page, limit })}`),
  /** Queues again the dead_letter deliveries created since `since`; answers how many. */
  recoverDeliveries: (id: string, since: Date) =>
    request<RecoverDeliveriesResponse>('POST', `/api/v1/bots/my/${e(id)}/deliveries/recover`, { since: since.toISOString() }),
  enableWebhook: (id: string) => request<Bot>('POST', `/api/v1/bots/my/${e(id)}/webhook/enable`, {}),
  retryDelivery: (id: string, deliveryId: string) => request<Delivery>('POST', `/api/v1/bots/my/${e(id)}/deliveries/${e(deliveryId)}/retry`, {}),
  metrics: (id: string, windowSeconds: number) => request<BotMetrics>('GET', `/api/v1/bots/my/${e(id)}/metrics${q({ window_seconds: windowSeconds })}`),
  testUpdate: (id: string, text: string) => request<CreateTestUpdateResponse>('POST', `/api/v1/bots/my/${e(id)}/test-updates`, { text }),
  /** The bot's messages in a chat, newest first. */
  chatMessages: (id: string, chatId: number, page: number, limit = 20) =>
    request<ListChatMessagesResponse>('GET', `/api/v1/bots/my/${e(id)}/chats/${chatId}/messages${q({ page, limit })}`),
  /** Presses a callback button of one of the bot's messages, as a test user. */
  pressButton: (id: string, body: Omit<CreateTestCallbackQueryRequest, 'id'>) =>
    request<CreateTestCallbackQueryResponse>('POST', `/api/v1/bots/my/${e(id)}/test-callback-queries`, body),
  reviewQueue: (status: ReviewStatus | '', page: number, limit = 20) =>
    request<ListBotsResponse>('GET', `/api/v1/admin/bots${q({ review_status: status, page, limit })}`),
  approve: (id: string) => request<Bot>('POST', `/api/v1/admin/bots/${e(id)}/approve`, {}),
  reject: (id: string, reason: string) => request<Bot>('POST', `/api/v1/admin/bots/${e(id)}/reject`, { reason }),
};
