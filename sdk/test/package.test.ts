/**
 * The package as a user gets it: it builds with tsc into what package.json's exports
 * name, the build imports in plain Node (no tsx), and MediaUploadCache is there,
 * deprecated, inert, and warns once per process.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MediaUploadCache } from '../src/index.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SDK = path.join(ROOT, 'sdk');

describe('the @botplatform/sdk package', () => {
  it('builds to the files its exports name, and the build loads in plain Node', () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-sdk-build-'));
    try {
      execFileSync(path.join(ROOT, 'node_modules/.bin/tsc'), ['-p', path.join(SDK, 'tsconfig.json'), '--outDir', out], { stdio: 'pipe' });
      const pkg = JSON.parse(fs.readFileSync(path.join(SDK, 'package.json'), 'utf8'));
      expect(pkg.name).toBe('@botplatform/sdk');
      for (const file of Object.values(pkg.exports['.']) as string[]) {
        expect(fs.existsSync(path.join(out, path.relative('dist', file))), file).toBe(true);
      }
      const script = `import(${JSON.stringify(path.join(out, 'index.js'))}).then((m) => console.log(JSON.stringify(Object.keys(m).sort())))`;
      const names = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
      expect(names).toEqual(expect.arrayContaining([
        'BotPlatformError', 'MediaUploadCache', 'WebhookVerificationError', 'createAdminClient', 'createBotClient',
        'createConsoleClient', 'createNodeWebhookHandler', 'expressWebhook', 'fastifyWebhook', 'runPolling', 'verifyWebhook',
        'runtimeMethods', 'consoleMethods', 'adminMethods',
      ]));
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });

  it('MediaUploadCache stores nothing and finds nothing', () => {
    const cache = new MediaUploadCache();
    cache.set('a'.repeat(64), 'file_1');
    expect(cache.get('a'.repeat(64))).toBeUndefined();
    expect(cache.has('a'.repeat(64))).toBe(false);
    expect(cache.size).toBe(0);
  });

  it('MediaUploadCache warns once per process, however often it is made or used', () => {
    const script =
      "import { MediaUploadCache } from './sdk/src/index.ts';\n" +
      "for (let i = 0; i < 3; i++) { const c = new MediaUploadCache(); c.set('x', 'y'); c.get('x'); }\n";
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
    expect(run.status).toBe(0);
    const warnings = run.stderr.split('\n').filter((l) => l.includes('MediaUploadCache is deprecated'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/DeprecationWarning/);
    expect(run.stderr).toMatch(/BOTPLATFORM_SDK_MEDIA_UPLOAD_CACHE/);
  });
});
