/**
 * ROLE=all's dispatcher threads (DISPATCHER_THREADS): the webhook dispatcher runs in
 * worker threads beside the main thread's ingest, gateway and core, so the embedded
 * default uses more than one core. Each thread opens its own backend on the same
 * database (SQLite in WAL mode: its own reader, and a writer that takes SQLite's one
 * write lock per unit) and is woken through the thread bus (src/bus/thread-bus.ts),
 * which gives each bot's updates to one thread; its sweep takes the same bots, so a bot
 * is served by one thread (on Kafka, each thread is a member of the dispatchers' group).
 * Leases make it safe as with several dispatcher processes: a thread that dies leaves its
 * attempts due again within the lease.
 *
 * From the main thread: the threads' log lines go through its logger (with `thread`),
 * their telemetry events are recorded on its telemetry and their gauges added to its own
 * (/metrics shows the process as one), and shutdown asks each to stop taking work, finish
 * its attempts, flush its usage statistics and close, and waits for it. A thread that dies
 * is logged as an error and started again (after 1 s, then backing off up to 30 s while it
 * keeps dying within a minute of its start); one that fails to start while the process
 * starts fails the start.
 *
 * Started when there is webhook work (`startWhen`, on the in-process bus): a process whose
 * bots all poll never pays a thread's memory (about 30 MB each). Until then, whether any
 * delivery is open is asked at the process's start, on each new update of a bot in webhook
 * mode (10 ms after it, at most every 100 ms) and every second; the first open delivery starts every thread, which
 * sweeps what is due at once. With Kafka the threads start with the process.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import { MessageChannel, Worker, type MessagePort, type TransferListItem } from 'node:worker_threads';
import type { ThreadBusHub } from './bus/thread-bus.js';
import type { DispatcherThreadData } from './dispatcher-thread.js';
import type { Root } from './process.js';
import { replayEvents, type TelemetryEvent } from './telemetry/thread-telemetry.js';

type FromThread =
  | { t: 'ready' }
  | { t: 'failed'; message: string }
  | { t: 'log'; line: string }
  | { t: 'events'; events: TelemetryEvent[] }
  | { t: 'gauges'; id: number; values: Record<string, number>; inFlight: number; trackedBots: number }
  | { t: 'closed' };

interface ThreadState {
  values: Record<string, number>;
  inFlight: number;
  trackedBots: number;
}

export interface DispatcherThreads {
  /** Attempts in flight in all threads. */
  inFlight(): Promise<number>;
  /** Bots the threads keep state for, together. */
  trackedBots(): Promise<number>;
  /** The threads' gauges, summed by name (asked of each thread; one question serves a scrape). */
  gauges(): Promise<Record<string, number>>;
  /** The running threads (diagnostics, and tests that end one). */
  threads(): Worker[];
  /** How many times a thread was started again after it died. */
  restarts(): number;
  /** Stops every thread gracefully (see above) and waits for them. */
  stop(): Promise<void>;
}

/** pino's numeric levels, by name. */
const LEVELS: Record<number, 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal'> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/**
 * The thread's entry: the compiled file beside this one, or under tsx (the sources: tests,
 * `npm run dev`) a small script that registers tsx's loader in the thread first.
 */
function spawnWorker(data: DispatcherThreadData, transfer: MessagePort[]): Worker {
  const here = fileURLToPath(import.meta.url);
  const ext = path.extname(here);
  const entry = pathToFileURL(path.join(path.dirname(here), `dispatcher-thread${ext}`)).href;
  const opts = { workerData: data, transferList: transfer as TransferListItem[], resourceLimits: { maxYoungGenerationSizeMb: 3 * THREAD_SEMI_SPACE_MB } };
  return withSemiSpace(() => {
    if (ext === '.js') return new Worker(new URL(entry), opts);
    // tsx's ESM API (the package's `import` export; require.resolve finds its CommonJS twin).
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
    return new Worker(`import(${JSON.stringify(tsx)}).then((t) => { t.register(); return import(${JSON.stringify(entry)}); })`, { ...opts, eval: true });
  });
}

/**
 * A dispatcher thread's semi-spaces (MiB; its young generation is three of them). A webhook
 * attempt is short-lived garbage, a burst makes thousands a second, and each scavenge copies
 * the attempts still in flight: with the 8 MiB that `npm start` gives the main thread (for
 * its idle memory), the thread spent about an eighth of its time in the scavenger.
 */
const THREAD_SEMI_SPACE_MB = 16;
/** `--max-semi-space-size` as the process was started with it (V8's flag; undefined: not given). */
const semiSpaceFlag = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)]
  .map((a) => /^--max[-_]semi[-_]space[-_]size=(\d+)$/.exec(a)?.[1]).filter((v) => v !== undefined).pop();

/** Threads being started with the thread's semi-space size (the flag goes back when none is). */
let pendingSemi = 0;

/**
 * Runs `spawn` (which starts a thread) with V8's --max-semi-space-size at the thread's size
 * until the thread is online: the flag, given to the process, applies to every isolate and
 * wins over a Worker's resourceLimits; an isolate reads it once, as it is created (on the
 * thread's start), so the main thread's heap keeps its own.
 */
function withSemiSpace(spawn: () => Worker): Worker {
  if (semiSpaceFlag === undefined || Number(semiSpaceFlag) >= THREAD_SEMI_SPACE_MB) return spawn();
  v8.setFlagsFromString(`--max-semi-space-size=${THREAD_SEMI_SPACE_MB}`);
  pendingSemi++;
  const restore = () => {
    if (--pendingSemi === 0) v8.setFlagsFromString(`--max-semi-space-size=${semiSpaceFlag}`);
  };
  try {
    const worker = spawn();
    let restored = false;
    const once = () => {
      if (!restored) restore();
      restored = true;
    };
    worker.once('online', once);
    worker.once('exit', once);
    return worker;
  } catch (err) {
    restore();
    throw err;
  }
}

/** When the threads start: once `due()` answers true, asked at start, on each `nudge` (throttled) and every second. */
export interface StartWhen {
  /** Whether any webhook delivery is open (the threads have work). */
  due(): Promise<boolean>;
  /** Registers the function to call when there may be new work (a new update). */
  nudges(nudge: () => void): void;
}

/** Least time between two `due()` questions while the threads wait for work. */
const NUDGE_MS = 100;
/**
 * How long a nudge's question waits at least: the update that nudged is still being
 * answered (its ingest call, the poll it woke), and a query on the event loop meanwhile
 * would hold those answers back.
 */
const NUDGE_AFTER_MS = 10;

export async function startDispatcherThreads(
  { config, logger, telemetry }: Root,
  opts: { threads: number; hub?: ThreadBusHub; coreGrpcAddress: string; startWhen?: StartWhen },
): Promise<DispatcherThreads> {
  const log = logger.child({ component: 'dispatcher-threads' });
  const live = new Map<number, Worker>();
  const states = new Map<Worker, ThreadState>();
  const asked = new Map<number, (s: ThreadState) => void>();
  let nextQuestion = 0;
  let stopping = false;
  let restarts = 0;
  const restartTimers = new Set<NodeJS.Timeout>();
  const closed = new Map<Worker, () => void>();

  /** Starts the thread of `slot`; resolves once it is ready. */
  function start(slot: number): Promise<Worker> {
    const channel = opts.hub ? new MessageChannel() : undefined;
    const data: DispatcherThreadData = { config, slot, slots: opts.threads, busPort: channel?.port2, coreGrpcAddress: opts.coreGrpcAddress };
    const worker = spawnWorker(data, channel ? [channel.port2] : []);
    if (channel) opts.hub!.attach(channel.port1);
    const startedAt = Date.now();
    return new Promise<Worker>((resolve, reject) => {
      let ready = false;
      worker.on('message', (msg: FromThread) => {
        switch (msg.t) {
          case 'ready':
            ready = true;
            // Started again while the process was stopping: it has taken nothing yet, so it just ends.
            if (stopping) void worker.terminate();
            else live.set(slot, worker);
            resolve(worker);
            break;
          case 'failed':
            reject(new Error(`dispatcher thread ${slot} failed to start: ${msg.message}`));
            void worker.terminate();
            break;
          case 'log':
            relog(msg.line);
            break;
          case 'events':
            replayEvents(telemetry, msg.events);
            break;
          case 'gauges':
            asked.get(msg.id)?.(msg);
            break;
          case 'closed':
            closed.get(worker)?.();
            void worker.terminate();
            break;
        }
      });
      worker.on('error', (err) => log.error({ err, thread: slot }, 'dispatcher thread failed'));
      worker.on('exit', (code) => {
        if (channel) opts.hub!.detach(channel.port1);
        if (live.get(slot) === worker) live.delete(slot);
        closed.get(worker)?.();
        if (!ready) {
          reject(new Error(`dispatcher thread ${slot} exited (${code}) before it was ready`));
          return;
        }
        if (stopping) return;
        // Died: its attempts' leases run out and its bots are swept again by the thread started in its place.
        const quick = Date.now() - startedAt < 60_000;
        const delay = quick ? Math.min(30_000, 1000 * 2 ** Math.min(5, restarts)) : 1000;
        log.error({ thread: slot, code, restartInMs: delay }, 'dispatcher thread exited; starting it again');
        restartLater(slot, delay);
      });
    });
  }

  function restartLater(slot: number, delay: number) {
    const timer = setTimeout(() => {
      restartTimers.delete(timer);
      if (stopping) return;
      restarts++;
      start(slot).then(
        () => log.info({ thread: slot }, 'dispatcher thread started again'),
        (err) => {
          log.error({ err, thread: slot }, 'dispatcher thread did not start again');
          restartLater(slot, 30_000);
        },
      );
    }, delay);
    restartTimers.add(timer);
  }

  /** A thread's JSON log line, logged again through this process's logger (redaction included). */
  function relog(line: string) {
    try {
      const { level, time: _time, pid: _pid, hostname: _host, service: _service, msg, ...fields } = JSON.parse(line) as Record<string, unknown>;
      const method = LEVELS[level as number] ?? 'info';
      logger[method](fields, typeof msg === 'string' ? msg : '');
    } catch {
      logger.warn({ line }, 'dispatcher thread wrote a log line that is not JSON');
    }
  }

  let question: Promise<ThreadState[]> | undefined;
  /** Each live thread's gauges and state, asked once for every caller within the same scrape. */
  function ask(): Promise<ThreadState[]> {
    question ??= Promise.all([...live.values()].map((w) => new Promise<ThreadState>((resolve) => {
      const id = nextQuestion++;
      const timer = setTimeout(() => {
        asked.delete(id);
        resolve(states.get(w) ?? { values: {}, inFlight: 0, trackedBots: 0 });
      }, 1000);
      asked.set(id, (s) => {
        clearTimeout(timer);
        asked.delete(id);
        states.set(w, s);
        resolve(s);
      });
      w.postMessage({ t: 'gauges', id });
    }))).finally(() => setTimeout(() => (question = undefined), 20));
    return question;
  }
  const sum = (list: ThreadState[], pick: (s: ThreadState) => number) => list.reduce((n, s) => n + pick(s), 0);

  /** Every thread's start (once); a failure ends those that started. */
  let startingAll: Promise<void> | undefined;
  function startAll(): Promise<void> {
    startingAll ??= Promise.all(Array.from({ length: opts.threads }, (_, slot) => start(slot))).then(
      () => log.debug({ threads: opts.threads }, 'dispatcher threads started'),
      async (err) => {
        await Promise.all([...live.values()].map((w) => w.terminate()));
        throw err;
      },
    );
    return startingAll;
  }

  // Waiting for work (see startWhen above).
  let asking: NodeJS.Timeout | undefined;
  let askedAt = 0;
  let poll: NodeJS.Timeout | undefined;
  const waiting = () => startingAll === undefined && !stopping;
  function nudge() {
    if (!waiting() || asking) return;
    asking = setTimeout(() => {
      askedAt = Date.now();
      void opts.startWhen!.due().then(
        (due) => {
          asking = undefined;
          if (due && waiting()) startOnWork();
        },
        (err) => {
          asking = undefined;
          log.warn({ err }, 'could not tell whether webhook deliveries are open');
        },
      );
    }, Math.max(NUDGE_AFTER_MS, askedAt + NUDGE_MS - Date.now()));
  }
  function startOnWork() {
    if (poll) clearInterval(poll);
    startAll().catch((err) => {
      // Tried again on the next nudge (at most every 30 s).
      log.error({ err }, 'dispatcher threads did not start');
      askedAt = Date.now() + 30_000;
      startingAll = undefined;
      poll = setInterval(nudge, 1000).unref();
    });
  }

  if (!opts.startWhen || (await opts.startWhen.due())) {
    await startAll();
  } else {
    opts.startWhen.nudges(nudge);
    poll = setInterval(nudge, 1000).unref();
  }

  return {
    inFlight: async () => sum(await ask(), (s) => s.inFlight),
    trackedBots: async () => sum(await ask(), (s) => s.trackedBots),
    async gauges() {
      const out: Record<string, number> = {};
      for (const s of await ask()) for (const [k, v] of Object.entries(s.values)) out[k] = (out[k] ?? 0) + v;
      return out;
    },
    threads: () => [...live.values()],
    restarts: () => restarts,
    async stop() {
      stopping = true;
      for (const t of restartTimers) clearTimeout(t);
      if (poll) clearInterval(poll);
      if (asking) clearTimeout(asking);
      await startingAll?.catch(() => {});
      const workers = [...live.values()];
      await Promise.all(workers.map((w) => new Promise<void>((resolve) => {
        // Bounded: a thread's attempts end within the webhook timeout; past the shutdown timeout it is ended.
        const timer = setTimeout(() => {
          log.warn('a dispatcher thread did not stop in time; ended');
          void w.terminate();
        }, config.shutdownTimeoutMs + config.webhookTimeoutMs);
        closed.set(w, () => {
          clearTimeout(timer);
          resolve();
        });
        w.postMessage({ t: 'stop' });
      })));
    },
  };
}
