/**
 * The rich-message RPCs of issue 33 not implemented yet: each answers UNIMPLEMENTED.
 * Each leaves this table for its domain service as it is written; the table goes
 * when it is empty.
 */
import { ApiError, Code } from '../errors.js';
import type { RuntimeRpc } from './rpc.js';

const pending = (name: string) => async (): Promise<never> => {
  throw new ApiError(Code.UNIMPLEMENTED, `${name} is not available yet`);
};

export function createPendingRpcs(): Pick<RuntimeRpc,
  | 'editMessageText' | 'editMessageCaption' | 'editMessageReplyMarkup' | 'deleteMessage' | 'deleteMessages'
  | 'sendChatAction' | 'copyMessage' | 'forwardMessage' | 'getChat' | 'sendMediaGroup'> {
  return {
    editMessageText: pending('editMessageText'),
    editMessageCaption: pending('editMessageCaption'),
    editMessageReplyMarkup: pending('editMessageReplyMarkup'),
    deleteMessage: pending('deleteMessage'),
    deleteMessages: pending('deleteMessages'),
    sendChatAction: pending('sendChatAction'),
    copyMessage: pending('copyMessage'),
    forwardMessage: pending('forwardMessage'),
    getChat: pending('getChat'),
    sendMediaGroup: pending('sendMediaGroup'),
  };
}
