/**
 * The interactive API reference at /docs: Swagger UI from the swagger-ui-dist
 * package, served by the gateway itself (no CDN, works offline), reading the
 * service's own /api/v1/openapi.json.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const PAGE = `<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="UTF-8">
    <title>Bot platform API reference</title>
    <link rel="stylesheet" type="text/css" href="/docs/swagger-ui.css">
    <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="/docs/swagger-ui-bundle.js" charset="UTF-8"></script>
    <script src="/docs/swagger-ui-standalone-preset.js" charset="UTF-8"></script>
    <script src="/docs/init.js" charset="UTF-8"></script>
  </body>
</html>
`;

const INIT = `window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: '/api/v1/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: 'StandaloneLayout',
  });
};
`;

/** Same-origin only: the page loads nothing from anywhere else. */
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

/** On every /docs answer: no content-type sniffing, and no Referer (the page's URL) sent to anyone. */
const HARDENING = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' };

export function registerDocsRoutes(app: FastifyInstance): void {
  const dir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const files = new Map(Object.entries(ASSETS).map(([name, type]) => [name, { type, body: fs.readFileSync(path.join(dir, name)) }]));
  files.set('init.js', { type: 'text/javascript; charset=utf-8', body: Buffer.from(INIT) });
  const page = (_req: unknown, reply: import('fastify').FastifyReply) =>
    reply.headers(HARDENING).header('content-security-policy', CSP).type('text/html; charset=utf-8').send(PAGE);
  app.get('/docs', page);
  app.get('/docs/', page);
  app.get<{ Params: { file: string } }>('/docs/:file', (request, reply) => {
    const file = files.get(request.params.file);
    if (!file) return reply.callNotFound();
    return reply.headers(HARDENING).header('cache-control', 'public, max-age=3600').type(file.type).send(file.body);
  });
}
