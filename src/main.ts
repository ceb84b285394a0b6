/** `npm start`: runs the configured role until SIGTERM/SIGINT. */
import { mintAccountJwt } from './auth/account-jwt.js';
import { startApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';

async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  const app = await startApp(config, logger);
  logger.info(
    { role: config.role, http: app.httpUrl, grpcPort: app.grpcPort, database: config.database.kind },
    'botplatform started',
  );

  // The banner, with its one-click console links, where this process serves the console
  // on a local signing secret (ROLE=all without AUTH_*; a core alone serves no console).
  const localSignIn = app.localSignIn;
  if (app.localJwtSecret && app.httpUrl && localSignIn) {
    // Log lines are buffered (logger.ts): the started line goes out before the banner.
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
    const secret = app.localJwtSecret;
    const developer = await mintAccountJwt(secret, { sub: 'developer', ...config.auth });
    const admin = await mintAccountJwt(secret, { sub: 'reviewer', roles: ['admin'], ...config.auth });
    // One-click console sign-in: the link carries a single-use code (in the fragment, which
    // browsers never send), exchanged by the page for a JWT minted then.
    const link = (sub: string, roles: string[]) =>
      `${app.httpUrl}/#sign-in=${localSignIn.issue(() => mintAccountJwt(secret, { sub, roles, expiresIn: '12h', ...config.auth }))}`;
    process.stdout.write(
      [
        '',
        `Bot platform is up on the embedded default: HTTP ${app.httpUrl}, gRPC ${config.host}:${app.grpcPort}, data in ${config.dataDir}`,
        'No AUTH_* setting, so a local signing secret was created in the data directory. Ready-made JWTs (30 days):',
        '',
        `  console (sub=developer):      ${developer}`,
        `  admin   (sub=reviewer, admin): ${admin}`,
        '',
        `Console: ${app.httpUrl}/   One-click sign-in (single use, 15 minutes):`,
        `  as developer: ${link('developer', [])}`,
        `  as reviewer:  ${link('reviewer', ['admin'])}`,
        '',
        `Try:   curl -s ${app.httpUrl}/api/v1/bots/my -H "Authorization: Bearer <console JWT>"`,
        'Mint more:   npm run -s mint-jwt -- --sub alice [--admin] [--ttl 7d]',
        '',
      ].join('\n') + '\n',
    );
  }

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // Every step below is bounded on its own; this is the backstop (SHUTDOWN_TIMEOUT plus a margin).
    const timer = setTimeout(() => {
      logger.error({ step: app.closingStep() }, 'shutdown took too long; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs + config.shutdownDrainMs + 5000);
    timer.unref();
    app.close().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
