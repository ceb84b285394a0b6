/**
 * The console in a real browser: Debian's Chromium (CHROMIUM_PATH, default
 * /usr/bin/chromium; .ci/run installs it) driven by playwright-core, which downloads
 * nothing. A missing browser fails the tests that need it: it is never a skip.
 */
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { build } from 'vite';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Builds the console into console/dist, where the gateway serves it from (as `npm run build:console`). */
export async function buildConsole(): Promise<void> {
  await build({ configFile: path.join(ROOT, 'console/vite.config.ts'), logLevel: 'error' });
}

export async function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`Chromium is not installed at ${CHROMIUM}: install Debian's package (apt-get install -y chromium) or set CHROMIUM_PATH`);
  }
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

/** Where screenshots go when SCREENSHOTS=1 (docs/screenshots, shown in README). */
export function screenshotPath(name: string): string | undefined {
  if (process.env.SCREENSHOTS !== '1') return undefined;
  const dir = path.join(ROOT, 'docs/screenshots');
  fs.mkdirSync(dir, { recursive: true });
  return path.join(dir, `${name}.png`);
}
