/** The file bytes and the signer of their URLs: shared by the core (which signs) and the gateway (which serves). */
import { secretKeyOf } from '../auth/secret-key.js';
import type { Root } from '../process.js';
import type { BlobStore } from './blob-store.js';
import { createLocalDiskStore } from './local-disk-store.js';
import { createUrlSigner, type UrlSigner } from './signed-token.js';

export interface FileStore {
  blobs: BlobStore;
  signer: UrlSigner;
}

/**
 * The configured blob store (BLOB_DIR on local disk, creating its folders, or the S3
 * bucket) with a signer keyed by the service's secret key. A bucket that does not answer
 * at start is logged, not fatal: the store may come back, and file calls answer 503 meanwhile.
 * The AWS SDK is loaded only for BLOB_STORE=s3: a process on the local disk does not pay its
 * memory (about 10 MB resident, which test/files-large.test.ts's bound notices).
 */
export async function openFileStore({ config, logger, shutdown }: Pick<Root, 'config' | 'logger' | 'shutdown'>): Promise<FileStore> {
  const signer = createUrlSigner(Buffer.from(secretKeyOf(config), 'base64'));
  const b = config.blobStore;
  if (b.kind === 'local') return { blobs: createLocalDiskStore(config.blobDir), signer };
  const { createS3Store } = await import('./s3-store.js');
  const store = createS3Store({ endpoint: b.endpoint, bucket: b.bucket, region: b.region, credentials: b.credentials, forcePathStyle: b.forcePathStyle, logger });
  shutdown.add('blobs', 'S3 client', async () => store.client.destroy());
  store.ping().then(
    () => logger.info({ bucket: b.bucket, endpoint: b.endpoint ?? 'aws' }, 'blob store: S3 bucket answers'),
    (err: Error) => logger.warn({ bucket: b.bucket, endpoint: b.endpoint ?? 'aws', reason: err.message }, 'blob store: S3 bucket does not answer'),
  );
  return { blobs: store, signer };
}
