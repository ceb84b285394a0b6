/**
 * Where a call's CPU goes in the service beside its floor: two CPU profiles of one bench run
 * (bench/cpu-profile-all.mjs), each cut to the seconds its process was busy with the call, and
 * their self time by module (or by function with --functions) in µs per request, scaled so
 * that each side's busy time is the CPU per request the bench measured for it (given). The
 * seconds kept are those where the marker (a module path's pattern, default the text
 * parser both run: src/messages/entities) has at least 20 ms of samples; pick a marker only
 * the call under study runs, since the floors' process serves every baseline.
 *
 *   node bench/profile-diff.mjs SERVICE.cpuprofile SERVICE_MS_PER_REQ FLOOR.cpuprofile FLOOR_MS_PER_REQ [--marker RE] [--functions]
 */
import fs from 'node:fs';

const args = process.argv.slice(2);
const flag = (name) => { const i = args.indexOf(name); return i < 0 ? undefined : args.splice(i, name === '--functions' ? 1 : 2)[1] ?? true; };
const marker = new RegExp(String(flag('--marker') ?? 'src/messages/entities'));
const functions = flag('--functions') !== undefined;
const [serviceFile, serviceMs, floorFile, floorMs] = args;
if (!floorMs) {
  console.error('usage: node bench/profile-diff.mjs SERVICE.cpuprofile SERVICE_MS_PER_REQ FLOOR.cpuprofile FLOOR_MS_PER_REQ [--marker RE] [--functions]');
  process.exit(2);
}

/** A sample's module: a package's name, or the path from src/, gateway/ or bench/ (compiled or not). */
const moduleOf = (frame) => {
  const url = (frame.url || `(${frame.functionName})`).replace(/^file:\/\//, '');
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  return pkg ? `pkg:${pkg[1]}` : url.replace(/^.*\/(src|gateway|bench)\//, '$1/').replace(/\.ts$/, '.js');
};

/** µs per request by key, over the marked seconds. */
function perRequest(file, msPerRequest) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const seconds = new Map();
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i];
    const spent = profile.timeDeltas[i + 1] ?? 0;
    const frame = nodes.get(profile.samples[i]).callFrame;
    if (frame.functionName === '(idle)') continue;
    const second = Math.floor((at - profile.startTime) / 1e6);
    let s = seconds.get(second);
    if (!s) seconds.set(second, (s = { byKey: new Map(), marked: 0, busy: 0 }));
    const mod = moduleOf(frame);
    const key = functions ? `${frame.functionName || '(anonymous)'} ${mod}:${frame.lineNumber + 1}` : mod;
    s.busy += spent;
    s.byKey.set(key, (s.byKey.get(key) ?? 0) + spent);
    if (marker.test(mod)) s.marked += spent;
  }
  const byKey = new Map();
  let busy = 0;
  for (const s of seconds.values()) {
    if (s.marked < 20_000) continue;
    busy += s.busy;
    for (const [k, v] of s.byKey) byKey.set(k, (byKey.get(k) ?? 0) + v);
  }
  const scale = (Number(msPerRequest) * 1000) / busy;
  return new Map([...byKey].map(([k, v]) => [k, v * scale]));
}

const service = perRequest(serviceFile, serviceMs);
const floor = perRequest(floorFile, floorMs);
const rows = [...new Set([...service.keys(), ...floor.keys()])]
  .map((k) => [k, service.get(k) ?? 0, floor.get(k) ?? 0])
  .sort((a, b) => (b[1] - b[2]) - (a[1] - a[2]));
const line = ([k, s, f]) => `${s.toFixed(1).padStart(8)} ${f.toFixed(1).padStart(8)} ${(s - f).toFixed(1).padStart(8)}  ${k}`;
console.log(`${'service'.padStart(8)} ${'floor'.padStart(8)} ${'more'.padStart(8)}  µs per request, by ${functions ? 'function' : 'module'}`);
for (const r of rows.slice(0, 40)) console.log(line(r));
console.log('  … where the floor spends more:');
for (const r of rows.slice(-8)) console.log(line(r));
