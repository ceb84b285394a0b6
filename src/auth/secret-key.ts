/** The service's secret key: it seals secrets at rest and signs file URLs. */
import type { Config } from '../config.js';
import { LOCAL_SECRET_KEY_FILE, loadOrCreateSecret } from './local-secrets.js';

/** Configured (SECRET_KEY), or created in DATA_DIR on the embedded default. */
export const secretKeyOf = (config: Config): string => config.secretKey ?? loadOrCreateSecret(config.dataDir, LOCAL_SECRET_KEY_FILE);
