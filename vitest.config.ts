import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'sdk/test/**/*.test.ts'],
    // test/integration needs MariaDB and Kafka: the integration pass (TEST_DATABASE_URL
    // and TEST_KAFKA_BROKERS, as .ci/run sets them) runs it.
    exclude: process.env.TEST_DATABASE_URL && process.env.TEST_KAFKA_BROKERS ? [] : ['test/integration/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
