/**
 * The console in a real browser: Debian's Chromium (CHROMIUM_PATH, default
 * /usr/bin/chromium) driven by playwright-core, which downloads nothing.
 * scripts/ensure-chromium.sh installs Debian's package when it is missing and it can
 * (root, or sudo without a password), so `npm test` provisions it on a fresh machine;
 * when it cannot, the tests that need the browser fail with its one-line reason: never
 * a skip.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { chromium, type Browser, type Page } from 'playwright-core';
import { build } from 'vite';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Builds the console into console/dist, where the gateway serves it from (as `npm run build:console`). */
export async function buildConsole(): Promise<void> {
  await build({ configFile: path.join(ROOT, 'console/vite.config.ts'), logLevel: 'error' });
}

/** Chromium's executable, installed first when missing (scripts/ensure-chromium.sh; its reason when it cannot). */
async function ensureChromium(): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)('bash', [path.join(ROOT, 'scripts/ensure-chromium.sh')], { timeout: 600_000 });
    return stdout.trim();
  } catch (err) {
    // Its last words: the one-line reason (after apt-get's own output, when that failed).
    const said = String((err as { stderr?: string }).stderr ?? '').trim().split('\n').slice(-10).join('\n');
    throw new Error(said || `scripts/ensure-chromium.sh failed: ${(err as Error).message}`);
  }
}

export async function launchChromium(): Promise<Browser> {
  const executablePath = await ensureChromium();
  return chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

/** Where screenshots go when SCREENSHOTS=1 (docs/screenshots, shown in docs/console.md). */
export function screenshotPath(name: string): string | undefined {
  if (process.env.SCREENSHOTS !== '1') return undefined;
  const dir = path.join(ROOT, 'docs/screenshots');
  fs.mkdirSync(dir, { recursive: true });
  return path.join(dir, `${name}.png`);
}

const AXE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core's critical, serious and moderate findings on the page as it is, one line each
 * ("impact id: targets"); only minor ones are left out. The script is evaluated by the
 * browser's debugger protocol: the console's CSP does not apply to it.
 */
export async function axeFindings(page: Page): Promise<string[]> {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    const r = await (window as unknown as { axe: { run: (c: unknown) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } })
      .axe.run({ resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')) }));
  });
  return result.filter((v) => v.impact !== 'minor').map((v) => `${v.impact} ${v.id}: ${v.targets.join(', ')}`);
}
