/** Configuration is validated at start: every bad value is named, with a reason. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseDuration } from '../src/config.js';

describe('config', () => {
  it('defaults to the embedded default: role all, SQLite under DATA_DIR, local auth', () => {
    const c = loadConfig({ DATA_DIR: '/tmp/bp' });
    expect(c).toMatchObject({ role: 'all', port: 8080, grpcPort: 50051, auth: { kind: 'local' } });
    expect(c.database).toEqual({ kind: 'sqlite', filename: '/tmp/bp/botplatform.sqlite' });
    expect(c.oneTimeTokenRetentionMs).toBe(7 * 86_400_000);
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

  it('refuses two JWT key sources at once', () => {
    expect(() => loadConfig({ AUTH_JWT_SECRET: 'x'.repeat(32), AUTH_JWKS_URL: 'https://id.example/jwks' })).toThrow(/at most one/);
  });

  it('parses durations', () => {
    expect([parseDuration('250ms'), parseDuration('15s'), parseDuration('5m'), parseDuration('1h'), parseDuration('7d'), parseDuration('100')])
      .toEqual([250, 15_000, 300_000, 3_600_000, 604_800_000, 100]);
    expect(parseDuration('soon')).toBeUndefined();
  });
});
