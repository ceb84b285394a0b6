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
    // Three test files at a time (vitest's default here would be one: cores - 1 on two cores).
    // Most files wait on servers, sockets and timers rather than compute: on the 2-core CI
    // machine the SQLite pass took 9 min with one and 5.5 with two (loaded machine, same suite);
    // on 2026-11-28, with the suite grown, 8.5 min with two and 6.7 with three, and the MariaDB +
    // Kafka pass 12.8 and 9.3 (CI took 25.6 min with two, over its 25).
    maxWorkers: 3,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
