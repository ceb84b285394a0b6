/**
 * Bot tokens: "sbot_" + 40 random base62 characters (~238 bits). Only the SHA-256
 * of a token is stored; a fast hash is right for a random secret of this size.
 */
import crypto from 'node:crypto';
import { sha256Hex } from '../sha256.js';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const TOKEN_PREFIX = 'sbot_';
const RANDOM_LENGTH = 40;
export const TOKEN_PREFIX_LENGTH = 12;
const TOKEN_SHAPE = /^sbot_[0-9A-Za-z]{32,128}$/;

/** Uniform base62 string from rejection-sampled random bytes. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of crypto.randomBytes(length * 2)) {
      if (byte < 248) out += ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export function generateBotToken(): string {
  return TOKEN_PREFIX + randomBase62(RANDOM_LENGTH);
}

export function hashBotToken(token: string): string {
  return sha256Hex(token);
}

export function tokenPrefixOf(token: string): string {
  return token.slice(0, TOKEN_PREFIX_LENGTH);
}

/** Whether a credential has the shape of a bot token (cheap check before any lookup). */
export function looksLikeBotToken(credential: string): boolean {
  return TOKEN_SHAPE.test(credential);
}

/** Constant-time comparison of two hex hashes. */
export function hashesEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}
