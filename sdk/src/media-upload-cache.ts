/**
 * MediaUploadCache was a client-side map from file checksums to file_ids. The
 * service now reuses content itself (upload-credentials with a checksum and a
 * reuseRequestId), so the cache is kept only so old code still compiles and runs:
 * it stores nothing, finds nothing, and warns once per process.
 */

let warned = false;

function warnOnce() {
  if (warned) return;
  warned = true;
  process.emitWarning(
    'MediaUploadCache is deprecated and does nothing: the service reuses uploaded content itself. ' +
      'Remove it and call uploadFile(), which sends the checksum and a reuseRequestId.',
    { type: 'DeprecationWarning', code: 'BOTPLATFORM_SDK_MEDIA_UPLOAD_CACHE' },
  );
}

/** @deprecated Does nothing; server-side reuse replaces it (see uploadFile). */
export class MediaUploadCache {
  constructor(_options?: unknown) {
    warnOnce();
  }

  /** @deprecated Always undefined. */
  get(_checksum: string): string | undefined {
    return undefined;
  }

  /** @deprecated Stores nothing. */
  set(_checksum: string, _fileId: string): this {
    return this;
  }

  /** @deprecated Always false. */
  has(_checksum: string): boolean {
    return false;
  }

  /** @deprecated Nothing to delete. */
  delete(_checksum: string): boolean {
    return false;
  }

  /** @deprecated Nothing to clear. */
  clear(): void {}

  /** @deprecated Always 0. */
  get size(): number {
    return 0;
  }
}
