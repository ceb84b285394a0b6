/**
 * The Python SDK (sdk/python) against the real service: mypy --strict over the package, its
 * examples and tests; its pytest suite (clients, errors and retries, polling, webhooks, files,
 * the example bots) against a service started here, on SQLite or on MariaDB + Kafka as the
 * run is; and the check: the wheel and the sdist built, the wheel installed into a
 * fresh virtual environment, and a script written from the package's README alone run there.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../../test/helpers/harness.js';
import { createTestPki, type TestPki } from '../../test/helpers/tls.js';
import { mustRun, requireTool, ROOT, run } from '../../test/polyglot/walk.js';

const PKG = path.join(ROOT, 'sdk/python');

describe('Python SDK', () => {
  let h: Harness;
  let pki: TestPki;
  let python: string;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    await requireTool('python3', ['--version'], 'install Python 3 with venv, e.g. the python3-venv package');
    // The venv of the SDK's pinned tools (the one `npm run generate` uses), built on first use.
    python = (await mustRun('installing the Python SDK\'s tools', 'bash',
      [path.join(ROOT, 'scripts/ensure-pyenv.sh'), path.join(PKG, 'requirements-dev.txt')], { timeout: 600_000 })).trim();
    pki = createTestPki();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-python-sdk-'));
    fs.writeFileSync(path.join(dir, 'cert.pem'), pki.cert);
    fs.writeFileSync(path.join(dir, 'key.pem'), pki.key);
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_RETRY_SCHEDULE: '200ms,400ms,600ms,800ms',
      // Small enough for the tests to meet a 429 within a few sends, short enough to wait out.
      RATE_LIMIT_CHAT: '5/2s',
    });
    env = {
      BOTPLATFORM_BASE_URL: h.url,
      BOTPLATFORM_DEVELOPER_JWT: await h.jwt('python-sdk-developer'),
      BOTPLATFORM_OTHER_JWT: await h.jwt('python-sdk-other'),
      BOTPLATFORM_ADMIN_JWT: await h.jwt('python-sdk-reviewer', { admin: true }),
      BOTPLATFORM_TLS_CERT: path.join(dir, 'cert.pem'),
      BOTPLATFORM_TLS_KEY: path.join(dir, 'key.pem'),
    };
  }, 600_000);
  afterAll(async () => {
    await h?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('is clean under mypy --strict (the generated code, the package, its examples and tests)', async () => {
    const res = await run(python, ['-m', 'mypy'], {
      cwd: PKG,
      env: { MYPY_CACHE_DIR: path.join(ROOT, '.infra/mypy-cache/python-sdk') },
      timeout: 300_000,
    });
    expect(res.stdout + res.stderr, res.stdout + res.stderr).toMatch(/^Success: no issues found/m);
    expect(res.status).toBe(0);
  }, 300_000);

  it('passes its pytest suite against the running service', async () => {
    const res = await run(python, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', '--tb=short', 'tests'], {
      cwd: PKG,
      env: { ...env, PYTHONPATH: path.join(PKG, 'src'), PYTHONDONTWRITEBYTECODE: '1' },
      timeout: 300_000,
    });
    const out = res.stdout + res.stderr;
    expect(res.status, out).toBe(0);
    const passed = /(\d+) passed/.exec(out);
    expect(Number(passed?.[1]), out).toBeGreaterThanOrEqual(30);
    expect(out).not.toMatch(/\d+ (failed|skipped|error)/);
  }, 300_000);

  it('builds a wheel and an sdist; the wheel in a fresh venv runs the script written from the README', async () => {
    const dist = path.join(dir, 'dist');
    await mustRun('building the wheel and the sdist', python, ['-m', 'build', '--no-isolation', '--sdist', '--wheel', '--outdir', dist, PKG], { timeout: 300_000 });
    const built = fs.readdirSync(dist).sort();
    expect(built).toEqual([expect.stringMatching(/^botplatform-0\.1\.0-py3-none-any\.whl$/), expect.stringMatching(/^botplatform-0\.1\.0\.tar\.gz$/)]);
    const wheel = path.join(dist, built[0]!);
    const listing = await mustRun('listing the wheel', python, ['-m', 'zipfile', '-l', wheel]);
    expect(listing).toMatch(/botplatform\/py\.typed/);
    expect(listing).toMatch(/botplatform\/_generated\/models\.py/);
    // The sdist carries the whole package (generated code and the PEP 561 marker included).
    const sdist = await mustRun('listing the sdist', 'tar', ['-tzf', path.join(dist, built[1]!)]);
    for (const file of ['py.typed', '__init__.py', 'clients.py', 'files.py', 'polling.py', 'webhook.py', '_generated/models.py', '_generated/methods.py']) {
      expect(sdist).toContain(`botplatform-0.1.0/src/botplatform/${file}`);
    }

    // A fresh venv (the package's dependencies from PyPI or pip's cache). First as the README
    // says, `pip install ./sdk/python` (an isolated build: pyproject's build requirements must
    // suffice); then the wheel built above replaces it, and what follows runs on the wheel.
    const venv = path.join(dir, 'fresh-venv');
    const venvPython = path.join(venv, 'bin/python');
    await mustRun('creating a fresh venv', 'python3', ['-m', 'venv', venv]);
    await mustRun('pip install ./sdk/python', venvPython,
      ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', PKG], { timeout: 300_000 });
    const installed = 'import importlib.metadata as m, botplatform; print(m.version("botplatform"), botplatform.__file__)';
    const fromSource = await mustRun('importing the package', venvPython, ['-c', installed], { cwd: dir, env: { PYTHONPATH: '' } });
    const [version, file] = fromSource.trim().split(' ');
    expect(version).toBe('0.1.0');
    expect(file!.startsWith(`${venv}/`) && file!.endsWith('/site-packages/botplatform/__init__.py'), file).toBe(true);
    await mustRun('installing the wheel', venvPython,
      ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--force-reinstall', '--no-deps', wheel], { timeout: 300_000 });
    // PEP 561 as a user meets it: a type checker finds the installed wheel's types (no stubs,
    // no source tree): the README script checks under mypy --strict, and a wrong call does not.
    const consumer = path.join(dir, 'consumer');
    fs.mkdirSync(consumer);
    fs.copyFileSync(path.join(PKG, 'tests/readme_walk.py'), path.join(consumer, 'readme_walk.py'));
    fs.writeFileSync(path.join(consumer, 'wrong.py'),
      'from botplatform import BotClient\nBotClient("t", base_url="http://x").send_message(chat_id="100", text="hi")\n');
    const typecheck = (file: string) => run(python, ['-m', 'mypy', '--strict',
      '--python-executable', path.join(venv, 'bin/python'), file], { cwd: consumer, env: { PYTHONPATH: '', MYPYPATH: '' }, timeout: 120_000 });
    const typed = await typecheck('readme_walk.py');
    expect(typed.stdout + typed.stderr).toMatch(/^Success: no issues found in 1 source file/m);
    const wrong = await typecheck('wrong.py');
    expect(wrong.status).toBe(1);
    expect(wrong.stdout).toMatch(/wrong\.py:2: error: Argument "chat_id" to "send_message" of "RuntimeMethods" has incompatible type "str"; expected "int"/);

    const res = await run(path.join(venv, 'bin/python'), [path.join(PKG, 'tests/readme_walk.py')], {
      cwd: dir,
      env: {
        BASE_URL: h.url,
        ACCOUNT_JWT: env.BOTPLATFORM_DEVELOPER_JWT!,
        ADMIN_JWT: env.BOTPLATFORM_ADMIN_JWT!,
        TLS_CERT: env.BOTPLATFORM_TLS_CERT!,
        TLS_KEY: env.BOTPLATFORM_TLS_KEY!,
        USERNAME: 'python_readme_walk',
        PYTHONPATH: '',
      },
      timeout: 120_000,
    });
    expect(res.status, res.stdout + res.stderr).toBe(0);
    const s = JSON.parse(res.stdout.trim().split('\n').pop()!);
    expect(s.created).toEqual({ id: expect.stringMatching(/^bot_/), review_status: 'pending' });
    expect(s.get_me).toBe('python_readme_walk');
    expect(s.answered).toEqual([
      { update_seq: 1, chat_id: 100, text: 'hello 0' },
      { update_seq: 2, chat_id: 101, text: 'hello 1' },
      { update_seq: 3, chat_id: 102, text: 'hello 2' },
    ]);
    expect(s.confirmed).toBe(true);
    expect(s.files).toEqual({ first: 'upload', second: 'reuse', same_checksum: true, sent: true });
    expect(s.webhook).toEqual({ verified_update_id: s.webhook.expected, expected: expect.any(Number), text: 'by webhook' });
    expect(s.rate_limited).toEqual({ error_code: 429, retry_after: expect.any(Number), description: expect.stringMatching(/Too Many Requests/) });
  }, 600_000);
});
