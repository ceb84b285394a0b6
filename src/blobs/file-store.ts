/** The file bytes and the signer of their URLs: shared by the core (which signs) and the gateway (which serves). */
import { secretKeyOf } from '../auth/secret-key.js';
import type { Config } from '../config.js';
import type { BlobStore } from './blob-store.js';
import { createLocalDiskStore } from './local-disk-store.js';
import { createUrlSigner, type UrlSigner } from './signed-token.js';

export interface FileStore {
  blobs: BlobStore;
  signer: UrlSigner;
}

/** Opens BLOB_DIR (creating its folders) with a signer keyed by the service's secret key. */
export function openFileStore(config: Config): FileStore {
  return { blobs: createLocalDiskStore(config.blobDir), signer: createUrlSigner(Buffer.from(secretKeyOf(config), 'base64')) };
}
