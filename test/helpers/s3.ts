/**
 * A real S3-compatible store for tests: TEST_S3_ENDPOINT (the infra pass sets it from
 * scripts/infra.sh), else the project's own s3proxy started by scripts/s3proxy.sh (a
 * shared instance, left running like MariaDB and Kafka). Each test file gets a bucket
 * of its own, emptied and removed after it.
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import {
  CreateBucketCommand, DeleteBucketCommand, DeleteObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command, S3Client,
} from '@aws-sdk/client-s3';
import { createS3Store } from '../../src/blobs/s3-store.js';

/** The fixed pair scripts/s3proxy.sh starts its server with (a private store on loopback). */
export const TEST_S3_CREDENTIALS = {
  accessKeyId: process.env.TEST_S3_ACCESS_KEY_ID ?? 'botplatform-test',
  secretAccessKey: process.env.TEST_S3_SECRET_ACCESS_KEY ?? 'botplatform-test-secret',
};

let started: string | undefined;

/** The store's endpoint, starting the project's s3proxy when TEST_S3_ENDPOINT is not set. */
export function s3Endpoint(): string {
  if (process.env.TEST_S3_ENDPOINT) return process.env.TEST_S3_ENDPOINT;
  if (!started) {
    const script = path.join(import.meta.dirname, '..', '..', 'scripts', 's3proxy.sh');
    execFileSync('bash', [script, 'up'], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 300_000 });
    started = execFileSync('bash', [script, 'url'], { encoding: 'utf8' }).trim();
  }
  return started;
}

export interface TestBucket {
  name: string;
  endpoint: string;
  /** The service's settings for this bucket. */
  env: Record<string, string>;
  client: S3Client;
  /** Keys of the objects under `prefix`, sorted. */
  keys(prefix?: string): Promise<string[]>;
  /** Multipart uploads not completed nor aborted, under `prefix`. */
  pendingMultipart(prefix?: string): Promise<string[]>;
  drop(): Promise<void>;
}

export async function createTestBucket(): Promise<TestBucket> {
  const endpoint = s3Endpoint();
  const name = `bp-test-${crypto.randomBytes(6).toString('hex')}`;
  const client = new S3Client({
    endpoint, region: 'us-east-1', forcePathStyle: true, credentials: TEST_S3_CREDENTIALS,
    requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED',
  });
  await client.send(new CreateBucketCommand({ Bucket: name }));
  const keys = async (prefix = '') => {
    const out: string[] = [];
    let ContinuationToken: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: name, Prefix: prefix, ContinuationToken }));
      out.push(...(page.Contents ?? []).map((o) => o.Key!));
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
    return out.sort();
  };
  return {
    name,
    endpoint,
    client,
    env: {
      BLOB_STORE: 's3', S3_ENDPOINT: endpoint, S3_BUCKET: name, S3_REGION: 'us-east-1', S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: TEST_S3_CREDENTIALS.accessKeyId, S3_SECRET_ACCESS_KEY: TEST_S3_CREDENTIALS.secretAccessKey,
    },
    keys,
    async pendingMultipart(prefix = '') {
      const res = await client.send(new ListMultipartUploadsCommand({ Bucket: name, Prefix: prefix }));
      return (res.Uploads ?? []).map((u) => u.Key!);
    },
    async drop() {
      const store = createS3Store({ endpoint, bucket: name, region: 'us-east-1', credentials: TEST_S3_CREDENTIALS, forcePathStyle: true });
      for (const k of await keys()) await store.delete(k);
      // s3proxy's filesystem backend keeps a key prefix's folder as a marker object.
      for (const marker of ['staging/', 'blobs/']) await client.send(new DeleteObjectCommand({ Bucket: name, Key: marker })).catch(() => {});
      await client.send(new DeleteBucketCommand({ Bucket: name }));
      store.client.destroy();
      client.destroy();
    },
  };
}
