/**
 * Golden test of the gateway generator on a small fixture proto
 * (test/fixtures/gateway-golden/proto): buf builds its image as scripts/generate.sh
 * does for proto/, the generator runs on it, and each output — route table, method
 * settings, constraints table, OpenAPI document, SDK bindings — must equal the checked-in golden file.
 * After an intended change to the generator: UPDATE_GOLDEN=1 npx vitest run test/gateway/generator.test.ts
 * rewrites the golden files; review their diff.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = path.resolve(import.meta.dirname, '../..');
const fixture = path.join(repo, 'test/fixtures/gateway-golden');
const update = process.env.UPDATE_GOLDEN === '1';

/** Generator output (relative to the root it writes into) → golden file. */
const OUTPUTS: Record<string, string> = {
  'gateway/generated/routes.ts': 'routes.ts.golden',
  'src/gen/methods.ts': 'methods.ts.golden',
  'src/gen/constraints.ts': 'constraints.ts.golden',
  'gateway/generated/openapi.json': 'openapi.json.golden',
  'sdk/src/generated/api.ts': 'api.ts.golden',
};

/** The vendored protos the fixture imports, from the repo's proto/ (buf itself has the well-known types). */
const IMPORTS = ['google/api/annotations.proto', 'google/api/http.proto', 'google/api/field_behavior.proto', 'botplatform/v1/options.proto'];

describe('gateway generator (golden)', () => {
  let tmp: string;
  const generated: Record<string, string> = {};

  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-golden-'));
    const module = path.join(tmp, 'proto');
    fs.cpSync(path.join(fixture, 'proto'), module, { recursive: true });
    for (const file of IMPORTS) {
      fs.mkdirSync(path.dirname(path.join(module, file)), { recursive: true });
      fs.copyFileSync(path.join(repo, 'proto', file), path.join(module, file));
    }
    fs.writeFileSync(path.join(module, 'buf.yaml'), 'version: v2\n');
    const image = path.join(tmp, 'image.json');
    execFileSync(path.join(repo, 'node_modules/.bin/buf'), ['build', module, '-o', image], { cwd: tmp, stdio: 'pipe' });

    const root = path.join(tmp, 'out');
    fs.mkdirSync(path.join(root, 'src/gen'), { recursive: true });
    execFileSync(process.execPath, ['--import', 'tsx', path.join(repo, 'gateway/generator/main.ts'), image, root], { cwd: repo, stdio: 'pipe' });
    for (const out of Object.keys(OUTPUTS)) generated[out] = fs.readFileSync(path.join(root, out), 'utf8');
  }, 60_000);

  afterAll(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it.each(Object.entries(OUTPUTS))('%s matches %s', (out, golden) => {
    const goldenPath = path.join(fixture, 'expected', golden);
    if (update) {
      fs.mkdirSync(path.dirname(goldenPath), { recursive: true });
      fs.writeFileSync(goldenPath, generated[out]!);
    }
    expect(fs.existsSync(goldenPath), `${goldenPath} is missing: run with UPDATE_GOLDEN=1`).toBe(true);
    expect(generated[out]).toBe(fs.readFileSync(goldenPath, 'utf8'));
  });

  it('routes only the bound methods, every binding, with their path, body and success code', () => {
    const routes = generated['gateway/generated/routes.ts']!;
    const methods = [...routes.matchAll(/"method":"(\w+)","template":"([^"]+)"/g)].map((m) => `${m[1]} ${m[2]}`);
    expect(methods).toEqual([
      'GET /api/v1/fixture/things/{id}',
      'POST /api/v1/fixture/owners/{owner_id}/things',
      'PATCH /api/v1/fixture/things/{id}',
      'PUT /api/v1/fixture/things/{id}',
      'POST /api/v1/fixture/ping',
    ]);
    expect(routes).not.toContain('ForgetThing');
    expect(generated['src/gen/methods.ts']).toContain('"/botplatform.fixture.v1.ThingService/ForgetThing"');
  });
});
