// Adds to package-lock.json the platform packages of @bufbuild/buf (darwin, win32,
// linux-armv7) that the registry mirror here does not carry. npm install leaves
// them out when it cannot fetch them, and npm ci then refuses the lockfile as out
// of sync. They are optional and for other platforms, so npm ci skips them here.
// Run after any `npm install`: node scripts/lock-optional-platforms.mjs
import fs from 'node:fs';

const file = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
const parent = lock.packages['node_modules/@bufbuild/buf'];
const PLATFORM = { 'darwin-arm64': ['darwin', 'arm64'], 'darwin-x64': ['darwin', 'x64'], 'linux-aarch64': ['linux', 'arm64'],
  'linux-armv7': ['linux', 'arm'], 'linux-x64': ['linux', 'x64'], 'win32-arm64': ['win32', 'arm64'], 'win32-x64': ['win32', 'x64'] };
let added = 0;
for (const [name, version] of Object.entries(parent?.optionalDependencies ?? {})) {
  const key = `node_modules/${name}`;
  if (lock.packages[key]) continue;
  const [os, cpu] = PLATFORM[name.replace('@bufbuild/buf-', '')] ?? [];
  if (!os) throw new Error(`unknown platform package ${name}`);
  lock.packages[key] = { version, cpu: [cpu], dev: true, license: 'Apache-2.0', optional: true, os: [os], engines: { node: '>=12' } };
  added++;
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
fs.writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
console.log(`added ${added} platform entries`);
