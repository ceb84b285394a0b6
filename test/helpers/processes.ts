/** Service processes a test file starts, each killed (-9) after the file if still running. */
import type { ChildProcess } from 'node:child_process';
import { afterAll } from 'vitest';
import { startServiceProcess } from './service-process.js';

export function serviceProcesses() {
  const children: ChildProcess[] = [];
  const killAll = () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  };
  afterAll(killAll);
  return {
    /** startServiceProcess, remembered for the clean-up. */
    async start(...args: Parameters<typeof startServiceProcess>): Promise<ChildProcess> {
      const child = await startServiceProcess(...args);
      children.push(child);
      return child;
    },
    killAll,
  };
}
