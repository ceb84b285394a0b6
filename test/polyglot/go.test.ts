/**
 * A Go client on stubs generated from proto/ by protoc-gen-go and protoc-gen-go-grpc,
 * run through buf with local plugins (test/polyglot/go/buf.gen.yaml), walks a bot's life
 * against the running service over loopback gRPC: create, approve, token, getMe, ingest,
 * long poll, sendMessage, and validation errors decoded with status.FromError and
 * Details() into google.rpc.BadRequest and google.rpc.ErrorInfo.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/harness.js';
import { clientEnv, expectWalk, mustRun, requireTool, ROOT, run, summaryOf } from './walk.js';

const DIR = path.join(ROOT, 'test/polyglot/go');

describe('Go client (protoc-gen-go and protoc-gen-go-grpc stubs)', () => {
  let h: Harness;
  let tmp: string;
  let program: string;

  beforeAll(async () => {
    await requireTool('go', ['version'], 'install the Go toolchain, 1.26 or newer');
    // The plugins, installed from the Go module proxy into .infra/bin on first use.
    const plugins = (await mustRun('installing protoc-gen-go and protoc-gen-go-grpc', 'bash',
      [path.join(ROOT, 'scripts/ensure-go-plugins.sh')], { timeout: 600_000 })).trim();
    // The stubs, made now from proto/ by buf with the local plugins (gen/ is gitignored).
    fs.rmSync(path.join(DIR, 'gen'), { recursive: true, force: true });
    await mustRun('generating the Go stubs', path.join(ROOT, 'node_modules/.bin/buf'),
      ['generate', '--template', 'test/polyglot/go/buf.gen.yaml', '--path', 'proto/botplatform', '--output', 'test/polyglot/go'],
      { env: { PATH: `${plugins}${path.delimiter}${process.env.PATH}` } });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'polyglot-go-'));
    program = path.join(tmp, 'client');
    await mustRun('building the Go client', 'go', ['build', '-buildvcs=false', '-o', program, '.'], { cwd: DIR, timeout: 600_000 });
    h = await startHarness('in-process');
  }, 900_000);
  afterAll(async () => {
    await h?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('walks a bot\'s life over gRPC and decodes the errors\' details', async () => {
    const res = await run(program, [], { env: await clientEnv(h, 'polyglot_go_bot') });
    expectWalk(summaryOf(res), { username: 'polyglot_go_bot', chatId: 730_000_001, language: 'Go' });
  });
});
