/** BotRecord (storage) → Bot (API message). */
import {
  BotStatus,
  DeliveryMode,
  FriendRequestMode,
  ReviewStatus,
  type Bot,
} from '../gen/botplatform/v1/bot.js';
import type { BotRecord, ReviewStatusValue } from '../storage/bots-repo.js';
import { botUserId } from '../wire.js';

export const REVIEW_STATUS: Record<ReviewStatusValue, ReviewStatus> = {
  pending: ReviewStatus.REVIEW_STATUS_PENDING,
  approved: ReviewStatus.REVIEW_STATUS_APPROVED,
  rejected: ReviewStatus.REVIEW_STATUS_REJECTED,
};

const BOT_STATUS = {
  inactive: BotStatus.BOT_STATUS_INACTIVE,
  active: BotStatus.BOT_STATUS_ACTIVE,
  suspended: BotStatus.BOT_STATUS_SUSPENDED,
};

const DELIVERY_MODE = { polling: DeliveryMode.DELIVERY_MODE_POLLING, webhook: DeliveryMode.DELIVERY_MODE_WEBHOOK };

export const FRIEND_REQUEST_MODE: Record<string, FriendRequestMode> = {
  auto_accept: FriendRequestMode.FRIEND_REQUEST_MODE_AUTO_ACCEPT,
  manual: FriendRequestMode.FRIEND_REQUEST_MODE_MANUAL,
  disabled: FriendRequestMode.FRIEND_REQUEST_MODE_DISABLED,
};

export const friendRequestModeName = (mode: FriendRequestMode): string | undefined =>
  Object.entries(FRIEND_REQUEST_MODE).find(([, m]) => m === mode)?.[0];

const orUndefined = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

/**
 * A token in Telegram's "<bot user id>:<token>" form (the id getMe answers on the
 * Telegram surface), for clients that check a token's shape: derived, nothing more is
 * stored, and only the Telegram surface takes it.
 */
export const telegramToken = (botId: string, token: string): string => `${botUserId(botId)}:${token}`;

/** The owner's view of a bot; the detail read adds webhook and one_time_token (with its Telegram form). */
export function toBotMessage(r: BotRecord, extra: Partial<Pick<Bot, 'oneTimeToken' | 'webhookDisabled'>> = {}): Bot {
  return {
    id: r.id,
    name: r.name,
    username: r.username,
    description: orUndefined(r.description),
    avatar: orUndefined(r.avatar),
    scopes: r.scopes,
    reviewStatus: REVIEW_STATUS[r.reviewStatus],
    status: BOT_STATUS[r.status],
    hasToken: r.tokenPrefix !== null,
    tokenPrefix: orUndefined(r.tokenPrefix),
    shortDescription: orUndefined(r.shortDescription),
    about: orUndefined(r.about),
    coverUrl: orUndefined(r.coverUrl),
    links: r.links,
    contact: orUndefined(r.contact),
    supportsInlineQueries: r.supportsInlineQueries,
    friendRequestMode: r.friendRequestMode
      ? (FRIEND_REQUEST_MODE[r.friendRequestMode] ?? FriendRequestMode.FRIEND_REQUEST_MODE_UNSPECIFIED)
      : FriendRequestMode.FRIEND_REQUEST_MODE_MANUAL,
    groupPrivacy: r.groupPrivacy,
    canJoinGroups: r.canJoinGroups,
    webhook: undefined,
    webhookDisabled: extra.webhookDisabled ?? false,
    commandMenu: r.commandMenu,
    deliveryMode: DELIVERY_MODE[r.deliveryMode],
    oneTimeToken: extra.oneTimeToken,
    telegramToken: extra.oneTimeToken === undefined ? undefined : telegramToken(r.id, extra.oneTimeToken),
    reviewReason: orUndefined(r.reviewReason),
    ownerId: r.ownerId,
    createdAt: new Date(r.createdAt),
    updatedAt: new Date(r.updatedAt),
  };
}
