/**
 * A Python client on stubs generated from proto/ by grpcio-tools (test/polyglot/python)
 * walks a bot's life against the running service over loopback gRPC: create, approve,
 * token, getMe, ingest, long poll, sendMessage, and validation errors decoded through
 * grpcio-status into google.rpc.BadRequest and google.rpc.ErrorInfo.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/harness.js';
import { clientEnv, expectWalk, mustRun, requireTool, ROOT, run, summaryOf } from './walk.js';

const DIR = path.join(ROOT, 'test/polyglot/python');

describe('Python client (grpcio-tools stubs)', () => {
  let h: Harness;
  let python: string;

  beforeAll(async () => {
    await requireTool('python3', ['--version'], 'install Python 3 with venv, e.g. the python3-venv package');
    // A venv with the pinned packages (built on first use, then cached in .infra/venv).
    python = (await mustRun('installing the Python client\'s packages', 'bash',
      [path.join(ROOT, 'scripts/ensure-pyenv.sh'), path.join(DIR, 'requirements.txt')], { timeout: 600_000 })).trim();
    // The stubs, made now from proto/ (gen/ is gitignored).
    const gen = path.join(DIR, 'gen');
    fs.rmSync(gen, { recursive: true, force: true });
    fs.mkdirSync(gen);
    const protos = fs.readdirSync(path.join(ROOT, 'proto/botplatform/v1')).filter((f) => f.endsWith('.proto')).map((f) => `proto/botplatform/v1/${f}`);
    await mustRun('generating the Python stubs', python,
      ['-m', 'grpc_tools.protoc', '-I', 'proto', `--python_out=${gen}`, `--pyi_out=${gen}`, `--grpc_python_out=${gen}`, ...protos]);
    h = await startHarness('in-process');
  }, 600_000);
  afterAll(() => h?.close());

  it('walks a bot\'s life over gRPC and decodes the errors\' details', async () => {
    const res = await run(python, [path.join(DIR, 'client.py')], { env: await clientEnv(h, 'polyglot_python_bot') });
    expectWalk(summaryOf(res), { username: 'polyglot_python_bot', chatId: 740_000_001, language: 'Python' });
  });
});
