/**
 * Ends a run with the failures, a line each (the file, the test or the suite whose hook
 * failed, the error's first line), then one plain line, "N passed, N failed", which CI
 * reads to tell a run that tested something from one that tested nothing. CI shows only a
 * run's tail: a failure outside a test (an afterAll hook, an import) is named there too.
 */
import { stripVTControlCharacters } from 'node:util';
import type { Reporter, TestModule, TestSuite } from 'vitest/node';

interface Failure {
  where: string;
  error: { name?: string; message?: string } | undefined;
}

const line = ({ where, error }: Failure) => {
  const first = (error?.message ?? '').split('\n').find((l) => l.trim() !== '') ?? '';
  return `  ${where}: ${error?.name ?? 'Error'}: ${stripVTControlCharacters(first).slice(0, 300)}`;
};

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const failures: Failure[] = [];
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const result = test.result();
        if (result.state === 'passed') passed++;
        else if (result.state === 'failed') {
          failedHere++;
          failures.push({ where: `${module.relativeModuleId} > ${test.fullName}`, error: result.errors?.[0] });
        } else skipped++;
      }
      // Errors outside the tests: the module's (an import, a top-level hook) and each suite's hooks.
      const suites: (TestModule | TestSuite)[] = [module, ...module.children.allSuites()];
      for (const suite of suites) {
        for (const error of suite.errors()) {
          const name = suite.type === 'module' ? '(the file)' : (suite as TestSuite).fullName;
          failures.push({ where: `${module.relativeModuleId} > ${name}`, error });
        }
      }
      // A file that failed outside its tests (a hook, an import) counts as a failure.
      failed += module.state() === 'failed' && failedHere === 0 ? 1 : failedHere;
    }
    if (failures.length > 0) process.stdout.write(`\nfailures:\n${failures.map(line).join('\n')}\n`);
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  }
}
