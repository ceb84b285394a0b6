/**
 * A preload that writes a V8 CPU profile of every process it is loaded into (the bench, its
 * floors' process and the service at once; BENCH_CPU_PROF profiles the service alone), to
 * CPU_PROFILE_DIR/<pid>.<script>.cpuprofile when the process exits or is stopped. Node does not
 * take --cpu-prof in NODE_OPTIONS; this starts the same profiler through the inspector:
 *
 *   mkdir -p /tmp/prof && CPU_PROFILE_DIR=/tmp/prof NODE_OPTIONS="--import $PWD/bench/cpu-profile-all.mjs" \
 *     BENCH_CALLS=sendMessage npm run bench:gateway
 *   node bench/profile-diff.mjs /tmp/prof/<service's>.cpuprofile 0.195 /tmp/prof/<baselines'>.cpuprofile 0.106
 *
 * The profiler costs CPU in every process: a profiled run's figures are not the bench's.
 */
import fs from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';

const dir = process.env.CPU_PROFILE_DIR ?? '.';
const script = path.basename(process.argv[1] ?? 'node').replace(/[^a-z0-9.-]+/gi, '_');
const session = new inspector.Session();
session.connect();
session.post('Profiler.enable', () => session.post('Profiler.start'));
let written = false;
/** Stops the profiler and writes its profile, then calls `then`. */
const write = (then = () => {}) => {
  if (written) return then();
  written = true;
  session.post('Profiler.stop', (err, result) => {
    if (!err) fs.writeFileSync(path.join(dir, `${process.pid}.${script}.cpuprofile`), JSON.stringify(result.profile));
    then();
  });
};
process.on('exit', () => write());
for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, () => write(() => process.exit(0)));
