/**
 * A third-party client discovers the core by reflection alone: grpcurl lists and
 * describes the services, calls them with an account JWT as metadata, and shows
 * the contract's status codes with google.rpc.BadRequest details.
 */
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/harness.js';

const ROOT = path.resolve(import.meta.dirname, '..');

describe('grpcurl with reflection', () => {
  let h: Harness;
  let grpcurl: string;
  let jwt: string;

  beforeAll(async () => {
    grpcurl = execFileSync('bash', [path.join(ROOT, 'scripts/ensure-grpcurl.sh')], { encoding: 'utf8', timeout: 480_000 }).trim();
    h = await startHarness('in-process');
    jwt = await h.jwt('grpcurl-user');
  }, 600_000);
  afterAll(() => h?.close());

  /** Async: the service runs in this process, so a blocking spawn would starve it. */
  const run = (...args: string[]) =>
    new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
      execFile(grpcurl, ['-plaintext', ...args], { encoding: 'utf8' }, (err, stdout, stderr) =>
        resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  it('lists and describes the services', async () => {
    const list = await run(h.grpcAddress, 'list');
    expect(list.status).toBe(0);
    expect(list.stdout.split('\n')).toEqual(expect.arrayContaining([
      'botplatform.v1.AdminService', 'botplatform.v1.ConsoleService', 'botplatform.v1.RuntimeService', 'grpc.health.v1.Health',
    ]));
    const describeOut = await run(h.grpcAddress, 'describe', 'botplatform.v1.Bot');
    expect(describeOut.status).toBe(0);
    expect(describeOut.stdout).toContain('.google.protobuf.Timestamp created_at');
  });

  it('describes the files with their options: HTTP bindings, field behaviour, language packages', async () => {
    const method = await run(h.grpcAddress, 'describe', 'botplatform.v1.ConsoleService.CreateApplication');
    expect(method.status).toBe(0);
    expect(method.stdout).toMatch(/google\.api\.http\)\s*=\s*\{\s*post:\s*"\/api\/v1\/bots\/applications"/);
    const request = await run(h.grpcAddress, 'describe', 'botplatform.v1.CreateApplicationRequest');
    // Within the field's options (up to its "];": its pattern holds brackets of its own, and a long option is spread over lines).
    expect(request.stdout).toMatch(/string name = 1 \[(?:(?!\];)[\s\S])*\(\.?google\.api\.field_behavior\) = REQUIRED/);
    expect(request.stdout).toMatch(/string name = 1 \[(?:(?!\];)[\s\S])*\(\.?botplatform\.v1\.constraints\) = \{\s*min_length: 1,\s*max_length: 100,\s*pattern: "\^/);
    // The whole file, as a stub generator would receive it from reflection.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grpcurl-protos-'));
    try {
      const out = await run('-proto-out-dir', dir, h.grpcAddress, 'describe', 'botplatform.v1.ConsoleService');
      expect(out.status).toBe(0);
      const file = fs.readFileSync(path.join(dir, 'botplatform/v1/console_service.proto'), 'utf8');
      expect(file).toMatch(/option go_package = "[^"]+;botplatformv1";/);
      expect(file).toContain('option java_package = "com.botplatform.v1";');
      expect(file).toContain('option csharp_namespace = "Botplatform.V1";');
      expect(file).toMatch(/service_settings\) = \{/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('calls CreateApplication and gets the contract\'s errors with field violations', async () => {
    const auth = ['-H', `authorization: Bearer ${jwt}`];
    const ok = await run(...auth, '-d', '{"name":"Curl","username":"grpcurl_bot"}', h.grpcAddress, 'botplatform.v1.ConsoleService/CreateApplication');
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout).bot).toMatchObject({ username: 'grpcurl_bot', review_status: 'REVIEW_STATUS_PENDING' });

    const bad = await run('-format-error', ...auth, '-d', '{"name":"Curl","username":"Bad"}', h.grpcAddress, 'botplatform.v1.ConsoleService/CreateApplication');
    expect(bad.status).not.toBe(0);
    const status = JSON.parse(bad.stdout || bad.stderr);
    expect(status.code).toBe(3);
    expect(status.details[0]).toMatchObject({
      '@type': 'type.googleapis.com/google.rpc.BadRequest',
      fieldViolations: [{ field: 'username', reason: 'INVALID_FORMAT' }],
    });

    expect(status.details).toContainEqual({
      '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
      reason: 'INVALID_ARGUMENT', domain: 'botplatform.dev', metadata: { field: 'username' },
    });

    const taken = await run('-format-error', ...auth, '-d', '{"name":"Curl","username":"grpcurl_bot"}', h.grpcAddress, 'botplatform.v1.ConsoleService/CreateApplication');
    const takenStatus = JSON.parse(taken.stdout || taken.stderr);
    expect(takenStatus.code).toBe(6); // ALREADY_EXISTS
    expect(takenStatus.details).toContainEqual({
      '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'ALREADY_EXISTS', domain: 'botplatform.dev', metadata: { field: 'username' },
    });

    const anonymous = await run('-format-error', '-d', '{}', h.grpcAddress, 'botplatform.v1.ConsoleService/ListMyBots');
    const anonymousStatus = JSON.parse(anonymous.stdout || anonymous.stderr);
    expect(anonymousStatus.code).toBe(16); // UNAUTHENTICATED
    expect(anonymousStatus.details).toEqual([{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'UNAUTHENTICATED', domain: 'botplatform.dev' }]);
  });

  it('answers the health check', async () => {
    const res = await run(h.grpcAddress, 'grpc.health.v1.Health/Check');
    expect(res.status).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual({ status: 'SERVING' });
  });
});
