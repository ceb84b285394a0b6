/** Configuration is validated at start: every bad value is named, with a reason. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseDuration } from '../src/config.js';

describe('config', () => {
  it('defaults to the embedded default: role all, SQLite under DATA_DIR, local auth', () => {
    const c = loadConfig({ DATA_DIR: '/tmp/bp' });
    expect(c).toMatchObject({ role: 'all', port: 8080, grpcPort: 50051, auth: { kind: 'local' } });
    expect(c.database).toEqual({ kind: 'sqlite', filename: '/tmp/bp/botplatform.sqlite' });
    expect(c.oneTimeTokenRetentionMs).toBe(7 * 86_400_000);
    expect(c.feed).toEqual({ maxGroupMembers: 100, maxStreamsPerConnection: 100 });
  });

  it('selects MySQL from DATABASE_URL and the auth source from AUTH_*', () => {
    const c = loadConfig({ DATABASE_URL: 'mariadb://u:p@db:3306/bots', AUTH_JWKS_URL: 'https://id.example/jwks', AUTH_JWT_ISSUER: 'https://id.example' });
    expect(c.database).toMatchObject({ kind: 'mysql', url: 'mysql://u:p@db:3306/bots' });
    expect(c.auth).toMatchObject({ kind: 'jwks', url: 'https://id.example/jwks', issuer: 'https://id.example' });
  });

  it('lists every bad value at once', () => {
    let err: ConfigError | undefined;
    try {
      loadConfig({ ROLE: 'everything', PORT: '99999', DATABASE_URL: 'postgres://x', AUTH_JWT_SECRET: 'short', ONE_TIME_TOKEN_RETENTION: 'soon' });
    } catch (e) {
      err = e as ConfigError;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const text = err!.problems.join('\n');
    for (const name of ['ROLE', 'PORT', 'DATABASE_URL', 'AUTH_JWT_SECRET', 'ONE_TIME_TOKEN_RETENTION']) expect(text).toContain(name);
  });

  it('refuses a separate gateway without SECRET_KEY: the file URLs the cores sign would not verify', () => {
    let err: ConfigError | undefined;
    try {
      loadConfig({ ROLE: 'gateway' });
    } catch (e) {
      err = e as ConfigError;
    }
    expect(err!.problems).toEqual([
      'SECRET_KEY: ROLE=gateway needs the SECRET_KEY its cores use (file URLs are signed with it): set the same base64 32-byte key on both',
    ]);
    expect(loadConfig({ ROLE: 'gateway', SECRET_KEY: Buffer.alloc(32, 1).toString('base64') }).role).toBe('gateway');
    expect(loadConfig({ ROLE: 'core' }).secretKey).toBeUndefined();
  });

  it('refuses two JWT key sources at once', () => {
    expect(() => loadConfig({ AUTH_JWT_SECRET: 'x'.repeat(32), AUTH_JWKS_URL: 'https://id.example/jwks' })).toThrow(/at most one/);
  });

  it('reads WEBHOOK_ALLOWED_PORTS (Telegram\'s by default) and refuses port 0 or a non-port', () => {
    expect(loadConfig({}).webhookAllowedPorts).toEqual([443, 80, 88, 8443]);
    expect(loadConfig({ WEBHOOK_ALLOWED_PORTS: '443, 9443' }).webhookAllowedPorts).toEqual([443, 9443]);
    for (const bad of ['0', '443,0', '65536', '443,http', '', '443,,80']) {
      expect(() => loadConfig({ WEBHOOK_ALLOWED_PORTS: bad }), bad).toThrow(/WEBHOOK_ALLOWED_PORTS: must be a comma-separated list of ports 1-65535/);
    }
  });

  it('reads WEBHOOK_DISABLE_AFTER (5 days by default) and refuses a non-duration or less than 1s', () => {
    expect(loadConfig({}).webhookDisableAfterMs).toBe(5 * 86_400_000);
    expect(loadConfig({ WEBHOOK_DISABLE_AFTER: '2s' }).webhookDisableAfterMs).toBe(2000);
    for (const bad of ['soon', '500ms']) {
      expect(() => loadConfig({ WEBHOOK_DISABLE_AFTER: bad }), bad).toThrow(/WEBHOOK_DISABLE_AFTER/);
    }
  });

  it('reads WEBHOOK_SOCKETS_PER_ORIGIN (256 by default) and refuses 0 or a non-number', () => {
    expect(loadConfig({}).webhookSocketsPerOrigin).toBe(256);
    expect(loadConfig({ WEBHOOK_SOCKETS_PER_ORIGIN: '16' }).webhookSocketsPerOrigin).toBe(16);
    for (const bad of ['0', 'many', '-1']) {
      expect(() => loadConfig({ WEBHOOK_SOCKETS_PER_ORIGIN: bad }), bad).toThrow(/WEBHOOK_SOCKETS_PER_ORIGIN/);
    }
  });

  it('selects the blob store: local disk by default, BLOB_STORE=s3 with its bucket, refusing what cannot work', () => {
    expect(loadConfig({}).blobStore).toEqual({ kind: 'local' });
    const s3 = loadConfig({
      BLOB_STORE: 's3', S3_ENDPOINT: 'http://127.0.0.1:9000/', S3_BUCKET: 'bot-files', S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: 'AKIDEXAMPLE', S3_SECRET_ACCESS_KEY: 'wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY',
    }).blobStore;
    expect(s3).toEqual({
      kind: 's3', endpoint: 'http://127.0.0.1:9000', bucket: 'bot-files', region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY' },
    });
    expect(loadConfig({ BLOB_STORE: 's3', S3_BUCKET: 'bot-files' }).blobStore).toMatchObject({ endpoint: undefined, credentials: undefined });
    expect(() => loadConfig({ BLOB_STORE: 's3' })).toThrow(/S3_BUCKET: BLOB_STORE=s3 needs S3_BUCKET/);
    expect(() => loadConfig({ BLOB_STORE: 'gcs' })).toThrow(/BLOB_STORE/);
    expect(() => loadConfig({ BLOB_STORE: 's3', S3_BUCKET: 'Bad_Bucket' })).toThrow(/S3_BUCKET: must be a bucket name/);
    expect(() => loadConfig({ BLOB_STORE: 's3', S3_BUCKET: 'b-1', S3_ENDPOINT: 'http://key:secret@store:9000' })).toThrow(/S3_ENDPOINT: must be an http\(s\) URL/);
    expect(() => loadConfig({ BLOB_STORE: 's3', S3_BUCKET: 'b-1', S3_ACCESS_KEY_ID: 'AKIDEXAMPLE' })).toThrow(/S3_ACCESS_KEY_ID: set both/);
    expect(() => loadConfig({ BLOB_STORE: 's3', S3_BUCKET: 'b-1', MAX_FILE_BYTES: String(6 * 1024 ** 3) })).toThrow(/MAX_FILE_BYTES: BLOB_STORE=s3 takes files of at most 5 GiB/);
    // A refused setting never repeats a secret's value.
    try {
      loadConfig({ BLOB_STORE: 's3', S3_BUCKET: 'b-1', S3_SECRET_ACCESS_KEY: 'wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY' });
      expect.unreachable();
    } catch (err) {
      expect(String(err)).not.toContain('wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY');
    }
  });

  it('parses durations', () => {
    expect([parseDuration('250ms'), parseDuration('15s'), parseDuration('5m'), parseDuration('1h'), parseDuration('7d'), parseDuration('100')])
      .toEqual([250, 15_000, 300_000, 3_600_000, 604_800_000, 100]);
    expect(parseDuration('soon')).toBeUndefined();
  });

  it('reads the limits, metrics and shutdown settings, and names each bad one with what it expects', () => {
    const c = loadConfig({ RATE_LIMIT_BOT: '100/10s', RATE_LIMIT_CHAT: 'off', QUOTA_DAILY: '0', METRICS_ENABLED: 'false', SHUTDOWN_TIMEOUT: '5s' });
    expect(c.limits).toEqual({ enabled: true, botRate: { count: 100, windowMs: 10_000 }, chatRate: null, dailyQuota: 0 });
    expect([c.metricsEnabled, c.shutdownTimeoutMs, c.shutdownDrainMs, c.statsFlushMs]).toEqual([false, 5000, 0, 1000]);
    expect(loadConfig({}).limits).toEqual({ enabled: true, botRate: { count: 30, windowMs: 1000 }, chatRate: { count: 20, windowMs: 60_000 }, dailyQuota: 100_000 });

    let err: ConfigError | undefined;
    try {
      loadConfig({ RATE_LIMIT_BOT: '30 per second', RATE_LIMIT_CHAT: '5/100ms', QUOTA_DAILY: '-1', LIMITS_ENABLED: 'maybe', SHUTDOWN_TIMEOUT: '1h' });
    } catch (e) {
      err = e as ConfigError;
    }
    expect(new Set(err!.problems)).toEqual(new Set([
      'RATE_LIMIT_BOT: must be "<count>/<window>" with a window from 1s to 24h (e.g. 30/1s, 20/1m), or off: "30 per second"',
      'RATE_LIMIT_CHAT: must be "<count>/<window>" with a window from 1s to 24h (e.g. 30/1s, 20/1m), or off: "5/100ms"',
      'QUOTA_DAILY: must be an integer from 0 to 1000000000: "-1"',
      'LIMITS_ENABLED: must be true or false: "maybe"',
      'SHUTDOWN_TIMEOUT: must be from 1s to 10m',
    ]));
  });
});
