/**
 * SHA-256 of a text, the one way the hot paths take it: crypto.hash where Node has it
 * (20.12 on: one call, no Hash object made per call), else createHash. Every bot call
 * hashes its token (src/auth/bot-token.ts), every send its chat's feed partition
 * (src/storage/feed-repo.ts). A leaf.
 */
import crypto from 'node:crypto';

const oneShot = typeof crypto.hash === 'function';

/** The digest's bytes. */
export const sha256 = (text: string): Buffer =>
  oneShot ? crypto.hash('sha256', text, 'buffer') as unknown as Buffer : crypto.createHash('sha256').update(text, 'utf8').digest();

/** The digest in hex. */
export const sha256Hex = (text: string): string =>
  oneShot ? crypto.hash('sha256', text, 'hex') : crypto.createHash('sha256').update(text, 'utf8').digest('hex');
