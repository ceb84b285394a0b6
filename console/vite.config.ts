/**
 * The console's build: Vite bundles console/src into content-hashed files under
 * /console/assets/ (served by gateway/runtime/console.ts); index.html is served at /.
 */
import path from 'node:path';
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: path.join(import.meta.dirname, 'dist'),
    emptyOutDir: true,
    assetsDir: 'assets',
    // Everything is a file of its own: nothing inline, for the Content-Security-Policy.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
  },
});
