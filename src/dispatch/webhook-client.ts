/**
 * One webhook request: signed per contract §5, sent to an address checked at
 * connect time (every resolved address must be allowed; the socket goes to the
 * checked one, so DNS cannot change the answer in between), 2xx is success,
 * redirects are not followed, a timeout bounds the whole exchange.
 *
 * Keep-alive sockets are pooled per allowed_ips policy, so a bot never rides a
 * socket opened for a bot with another policy; and every request, on a new or a
 * reused socket, checks the socket's actual remote address against the SSRF rule,
 * the port rule and its own bot's allowed_ips before a byte of it is written.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { LookupFunction, Socket } from 'node:net';
import tls from 'node:tls';
import ipaddr from 'ipaddr.js';
import { DEFAULT_WEBHOOK_PORTS, judgeAddresses, parseCidrs, portOf, systemLookup, type Cidr, type Lookup, type TargetPolicy } from '../net/ssrf.js';

export interface WebhookClientOptions {
  timeoutMs: number;
  /** Ranges exempt from the SSRF check and the port rule (WEBHOOK_ALLOWED_CIDRS). */
  allowedCidrs: Cidr[];
  /** Ports a target outside allowedCidrs may use (WEBHOOK_ALLOWED_PORTS; Telegram's by default). */
  allowedPorts?: number[];
  /** Extra trusted CA, PEM (WEBHOOK_CA_FILE). */
  caFile?: string;
  lookup?: Lookup;
  /**
   * Most requests progressing at once to one origin (scheme, host, port) per allowed_ips
   * policy, and most idle connections kept to it (WEBHOOK_SOCKETS_PER_ORIGIN, default 256):
   * requests beyond wait for a turn, so many bots behind one host (a bot framework's shared
   * endpoint) reuse a bounded set of warm connections instead of a TLS handshake (and a
   * socket's memory) per attempt in flight. A request unanswered after `slowMs` leaves the
   * bound (it goes on, on its own connection, until the timeout), so bots that hang behind
   * a shared endpoint cannot hold up the others there. Bots on other origins never wait.
   */
  socketsPerOrigin?: number;
  /** After how long an unanswered request leaves its origin's bound (default: a quarter of the timeout, at most 1 s). */
  slowMs?: number;
  /**
   * Most connections open at once, to every origin together (WEBHOOK_MAX_SOCKETS, held
   * under the process's file-descriptor limit by the caller): with many bots on many hosts,
   * each origin's idle keep-alive connections would otherwise add up to one per bot. At the
   * cap, the idle connection used least recently is closed for a request that needs a new
   * one; when every connection is busy, the request waits for one to end.
   */
  maxSockets?: number;
}

export interface WebhookRequest {
  url: string;
  body: string;
  secret: string;
  /** The secret before a rotation, still valid: its signature is sent after the current one's. */
  previousSecret?: string | null;
  updateId: number;
  /** The bot's allowed_ips: when set, the target address must be inside one of them. */
  allowedIps: string[];
  /** Also send X-Telegram-Bot-Api-Secret-Token (webhooks set through the Telegram-compatible surface). */
  secretHeader?: boolean;
  /** Keep a 2xx answer's body (at most MAX_ANSWER_BYTES): a Telegram-surface webhook may answer with a method to run. */
  keepAnswer?: boolean;
}

/** Largest answer body kept (see WebhookRequest.keepAnswer); a larger one is read to its end and dropped. */
export const MAX_ANSWER_BYTES = 1 << 20;

export interface WebhookResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  /**
   * Why no answer came (statusCode null): the target was refused before contact, the
   * exchange timed out, or the connection failed (DNS, TCP, TLS). Null when it answered.
   */
  noAnswer: 'refused' | 'timeout' | 'network' | null;
  durationMs: number;
  /** With keepAnswer, a 2xx answer's body and content type; `tooLarge` when it passed MAX_ANSWER_BYTES. */
  answer?: { contentType: string; body: Buffer; tooLarge: boolean };
  /** The headers sent (none when the target was refused before contact), for the delivery log. */
  sentHeaders: Record<string, string>;
  /** The answer, for the delivery log: its headers and the first RESPONSE_BODY_KEPT bytes of its body; null without one. */
  logged: LoggedAnswer | null;
}

export interface LoggedAnswer {
  headers: Record<string, string>;
  body: string;
  truncated: boolean;
}

/** How much of an answer's body the delivery log keeps (the rest is read and dropped). */
export const RESPONSE_BODY_KEPT = 4096;
/** Most answer headers kept, and the longest value kept of each. */
const RESPONSE_HEADERS_KEPT = 50;
const HEADER_VALUE_KEPT = 1024;

/** An answer's headers as the log keeps them: lowercase names, repeated ones joined, bounded. */
function keptHeaders(raw: import('node:http').IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw).slice(0, RESPONSE_HEADERS_KEPT)) {
    if (value === undefined) continue;
    out[name] = (Array.isArray(value) ? value.join(', ') : String(value)).slice(0, HEADER_VALUE_KEPT);
  }
  return out;
}

/**
 * The signature headers of contract §5: X-Service-Signature-V2 carries one signature, or,
 * during a secret rotation's overlap (`previous`: the secret before, or its key), two
 * separated by a space, the current secret's first (as Svix's header carries several);
 * a receiver accepts the delivery when any of them matches. With `secretHeader` (a webhook set through the
 * Telegram-compatible surface) also Telegram's secret-token header — the secret itself,
 * over the HTTPS-only webhook — so Telegram frameworks' webhook handlers accept the
 * delivery. Native webhooks never send the secret. `key`: the secret as a prepared HMAC
 * key (the dispatcher keeps one per secret).
 */
export function signatureHeaders(
  secret: string, body: string, updateId: number, now = Date.now(), secretHeader = false, key: string | crypto.KeyObject = secret,
  previous: string | crypto.KeyObject | null = null,
): Record<string, string> {
  const timestamp = String(Math.floor(now / 1000));
  const signature = sign(key, timestamp, body);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-service-timestamp': timestamp,
    'x-service-signature-v2': previous === null ? signature : `${signature} ${sign(previous, timestamp, body)}`,
    'x-service-update-id': String(updateId),
  };
  if (secretHeader) headers['x-telegram-bot-api-secret-token'] = secret;
  return headers;
}

/** The hex HMAC-SHA256 of `timestamp.body` (contract §5) under `key` (the secret, or its key object). */
function sign(key: string | crypto.KeyObject, timestamp: string, body: string): string {
  return crypto.createHmac('sha256', key).update(timestamp).update('.').update(body).digest('hex');
}

/** The pool of a bot's requests (see poolFor): its allowed_ips, sorted, each once. */
const policyKeyOf = (allowedIps: string[]) => (allowedIps.length === 0 ? '' : [...new Set(allowedIps)].sort().join(','));

/**
 * The origin whose turns (socketsPerOrigin) a webhook's requests take: its allowed_ips
 * policy, host and port, as the client keys them. Null for a URL that is not one (refused
 * before contact, it takes no turn). The dispatcher claims no more for an origin than its
 * turns can send soon (src/dispatch/dispatcher.ts, Origins).
 */
export function originOf(url: string, allowedIps: string[]): string | null {
  try {
    return `${policyKeyOf(allowedIps)}|${new URL(url).host}`;
  } catch {
    return null;
  }
}

class Refused extends Error {}
class TimedOut extends Error {}

/** Most idle per-policy pools kept before idle ones are dropped (busy ones never are). */
const MAX_IDLE_POOLS = 256;
/** Most parsed targets (URL and allowed_ips pairs) and signing keys kept; past this, all are dropped. */
const MAX_TARGETS = 10_000;

/**
 * A webhook URL as a bot's requests use it, parsed once: where to connect, which
 * origin's turns and which pool it takes, and, for a target refused before contact
 * (not a URL, not https, an IP literal or port the rules refuse), why.
 */
interface Target {
  refusal: string | null;
  /** The host without brackets, as the checks and the TLS connection take it. */
  host: string;
  port: number;
  /** Path and query, as sent. */
  path: string;
  /** `user:password` when the URL has them (sent as basic auth). */
  auth: string | undefined;
  allowedIps: Cidr[];
  /** Its pool (see poolFor): the sorted allowed_ips. */
  policyKey: string;
  /** Its origin's turns (see turnAt). */
  turnKey: string;
  /** What a socket's peer is judged for: host, port and allowed_ips (targets that share it share the verdict). */
  checkKey: string;
  lookup: LookupFunction | null;
}

export function createWebhookClient(opts: WebhookClientOptions) {
  const lookup = opts.lookup ?? systemLookup;
  const policy: TargetPolicy = { allowedCidrs: opts.allowedCidrs, allowedPorts: opts.allowedPorts ?? DEFAULT_WEBHOOK_PORTS };
  // One secure context for every connection: handing `ca` to each socket would
  // parse the whole root store (~150 certificates) per TLS handshake.
  const secureContext = opts.caFile
    ? tls.createSecureContext({ ca: [...tls.rootCertificates, fs.readFileSync(opts.caFile, 'utf8')] })
    : undefined;
  // A pool per allowed_ips set: Node's agent keys sockets by host and port only, and
  // a reused socket skips the lookup, so one shared pool would carry a bot to an
  // address checked against another bot's policy. Bots without allowed_ips (most)
  // share one pool, so a shared endpoint still keeps its warm sockets.
  const pools = new Map<string, https.Agent>();

  // Every connection open, and the idle ones in the order they fell idle (least recently
  // used first): Map keeps insertion order, and a socket put back is moved to the end.
  const maxSockets = opts.maxSockets ?? Infinity;
  let open = 0;
  /** Idle connections, least recently used first, each with its origin (policy|host|port). */
  const idle = new Map<Socket, string>();
  /** Idle connections per origin: a request with one there reuses it and needs no room. */
  const idleAt = new Map<string, number>();
  const originOf = new WeakMap<Socket, string>();
  /** Connections closed by slot() to make room: the room is its caller's, not a waiter's. */
  const claimed = new WeakSet<Socket>();
  const busy = (socket: Socket) => {
    const origin = idle.get(socket);
    if (origin === undefined) return;
    idle.delete(socket);
    const n = (idleAt.get(origin) ?? 1) - 1;
    if (n > 0) idleAt.set(origin, n);
    else idleAt.delete(origin);
  };
  /** Requests waiting for room (every connection busy), with the origin each goes to. */
  const slotWaiters: { origin: string; wake: () => void }[] = [];
  const stats = { evicted: 0, waited: 0, peak: 0 };
  function tracked(agent: https.Agent, policyKey: string): https.Agent {
    const create = agent.createConnection as (...args: unknown[]) => Socket;
    agent.createConnection = (...args: unknown[]) => {
      const socket = create.apply(agent, args);
      const o = args[0] as { host?: string; port?: number };
      originOf.set(socket, `${policyKey}|${o.host}|${o.port}`);
      open++;
      stats.peak = Math.max(stats.peak, open);
      socket.once('close', () => {
        open--;
        busy(socket);
        if (!claimed.has(socket)) slotWaiters.shift()?.wake();
      });
      return socket;
    };
    // A free connection handed to a request is busy from that moment (the request's 'socket'
    // event comes a tick later): slot() must not close it for room in between.
    const reuse = agent.reuseSocket.bind(agent);
    agent.reuseSocket = (socket, req) => {
      busy(socket as Socket);
      reuse(socket, req);
    };
    // After the agent's own handler: a socket it kept is idle now; one it closed is not.
    agent.on('free', (socket: Socket) => {
      if (socket.destroyed) return;
      const origin = originOf.get(socket) ?? '';
      // Requests are waiting for room: one going to this origin takes this connection as
      // it is; else it is closed to make room for the first.
      const same = slotWaiters.length > 0 ? slotWaiters.findIndex((w) => w.origin === origin) : -1;
      if (slotWaiters.length > 0 && same < 0) {
        stats.evicted++;
        socket.destroy();
        return;
      }
      busy(socket);
      idle.set(socket, origin);
      idleAt.set(origin, (idleAt.get(origin) ?? 0) + 1);
      if (same >= 0) slotWaiters.splice(same, 1)[0]!.wake();
    });
    return agent;
  }
  /**
   * Room for a connection to `origin`: none needed while it has an idle one to reuse; else,
   * at the cap, the least recently used idle connection is closed, or it waits for one to end.
   */
  async function slot(origin: string): Promise<void> {
    while (open >= maxSockets && !idleAt.has(origin)) {
      const lru = idle.keys().next();
      if (!lru.done) {
        const socket = lru.value;
        busy(socket);
        stats.evicted++;
        // `open` drops on its 'close' (the next turn of the event loop): wait for it, so the
        // new connection never makes one more than the cap.
        claimed.add(socket);
        await new Promise<void>((r) => {
          socket.once('close', () => r());
          socket.destroy();
        });
        continue;
      }
      stats.waited++;
      await new Promise<void>((wake) => slotWaiters.push({ origin, wake }));
    }
  }

  function poolFor(key: string): https.Agent {
    let agent = pools.get(key);
    if (!agent) {
      if (pools.size >= MAX_IDLE_POOLS) {
        // Idle pools are dropped: their free sockets close on the agent's idle timeout.
        for (const [k, a] of pools) if (Object.keys(a.sockets).length === 0 && Object.keys(a.requests).length === 0) pools.delete(k);
      }
      agent = tracked(new https.Agent({
        // Progressing requests per origin are bounded by turnAt; slow ones need sockets of their own.
        keepAlive: true, maxSockets: Infinity, maxFreeSockets: bound, secureContext, timeout: opts.timeoutMs,
      }), key);
      pools.set(key, agent);
    }
    return agent;
  }

  // Parsed targets by allowed_ips and URL (a bot posts to the same URL again and again).
  const targets = new Map<string, Target>();
  function targetOf(url: string, allowedIps: string[]): Target {
    const key = allowedIps.length === 0 ? url : `${allowedIps.join(',')}\n${url}`;
    let target = targets.get(key);
    if (!target) {
      if (targets.size >= MAX_TARGETS) targets.clear();
      targets.set(key, (target = parseTarget(url, allowedIps)));
    }
    return target;
  }
  function parseTarget(text: string, allowedIpsText: string[]): Target {
    const refused = (refusal: string): Target => ({ refusal, host: '', port: 0, path: '', auth: undefined, allowedIps: [], policyKey: '', turnKey: '', checkKey: '', lookup: null });
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return refused('invalid webhook url');
    }
    if (url.protocol !== 'https:') return refused('refused target: not an https URL');
    const allowedIps = allowedIpsText.length === 0 ? [] : parseCidrs(allowedIpsText);
    const port = portOf(url);
    // An IP-literal host never reaches the lookup: check it here.
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (ipaddr.isValid(host) || port === 0) {
      const refusal = judgeAddresses(host, port, [host], policy, allowedIps);
      if (refusal) return refused(`refused target: ${refusal}`);
    }
    const policyKey = policyKeyOf(allowedIpsText);
    return {
      refusal: null, host, port, path: `${url.pathname}${url.search}`, allowedIps, policyKey,
      auth: url.username || url.password ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : undefined,
      turnKey: `${policyKey}|${url.host}`, checkKey: `${policyKey}|${host}|${port}`, lookup: guardedLookup(port, allowedIps),
    };
  }

  // HMAC keys by secret (an HMAC keyed with a string prepares the key anew each time).
  const keys = new Map<string, crypto.KeyObject>();
  function keyOf(secret: string): crypto.KeyObject {
    let key = keys.get(secret);
    if (!key) {
      if (keys.size >= MAX_TARGETS) keys.clear();
      keys.set(secret, (key = crypto.createSecretKey(Buffer.from(secret, 'utf8'))));
    }
    return key;
  }

  // Turns per origin and policy: requests progressing now, and those waiting for a turn.
  const bound = opts.socketsPerOrigin ?? 256;
  const slowMs = opts.slowMs ?? Math.min(1000, Math.floor(opts.timeoutMs / 4));
  const turns = new Map<string, { active: number; waiting: (() => void)[] }>();
  /** Takes a turn at this origin: the function that gives it back (once), or null when every turn is taken. */
  function turnAt(key: string): (() => void) | null {
    let t = turns.get(key);
    if (!t) turns.set(key, (t = { active: 0, waiting: [] }));
    if (t.active >= bound) return null;
    t.active++;
    return giveBackOf(key, t);
  }
  /** Waits for a turn at this origin (every one was taken): it is handed over with active unchanged. */
  async function waitForTurn(key: string): Promise<() => void> {
    const t = turns.get(key)!;
    await new Promise<void>((r) => t.waiting.push(r));
    return giveBackOf(key, t);
  }
  function giveBackOf(key: string, t: { active: number; waiting: (() => void)[] }) {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = t.waiting.shift();
      if (next) next();
      else if (--t.active === 0) turns.delete(key);
    };
  }

  /** Resolves and checks every address; hands the socket the first one. */
  function guardedLookup(port: number, allowedIps: Cidr[]): LookupFunction {
    return (hostname, options, callback) => {
      lookup(hostname).then(
        (addresses) => {
          const refusal = judgeAddresses(hostname, port, addresses, policy, allowedIps);
          if (refusal) return callback(new Refused(`refused target: ${refusal}`), '', 4);
          const address = addresses[0]!;
          const family = ipaddr.parse(address).kind() === 'ipv6' ? 6 : 4;
          if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
          else callback(null, address, family);
        },
        () => callback(new Refused(`refused target: cannot resolve ${hostname}`), '', 4),
      );
    };
  }

  // What each socket's peer was last found allowed for (a target's checkKey): a socket's
  // peer does not change, so a reused socket's verdict for the same host, port and
  // allowed_ips stands (every bot's URL on that origin shares it); for any other, its peer
  // is judged again.
  const verified = new WeakMap<Socket, string>();

  return {
    async send(req: WebhookRequest): Promise<WebhookResult> {
      let started = performance.now();
      let sentHeaders: Record<string, string> = {};
      const done = (r: Omit<WebhookResult, 'durationMs' | 'sentHeaders' | 'logged'>, logged: LoggedAnswer | null = null): WebhookResult =>
        ({ ...r, durationMs: Math.round(performance.now() - started), sentHeaders, logged });
      const target = targetOf(req.url, req.allowedIps);
      if (target.refusal !== null) return done({ ok: false, statusCode: null, error: target.refusal, noAnswer: 'refused' });
      const giveBack = turnAt(target.turnKey) ?? (await waitForTurn(target.turnKey));
      // At the connection cap, a request with no idle connection of its own origin to reuse
      // makes room first (the least recently used idle one is closed, or it waits).
      if (open >= maxSockets) await slot(`${target.policyKey}|${target.host}|${target.port}`);
      started = performance.now(); // the exchange's duration, not the wait for a turn
      const { host, port } = target;
      return new Promise<WebhookResult>((answer) => {
        // One timer per exchange: at slowMs it leaves its origin's bound, then it runs on to the timeout.
        let slow = false;
        let timer = setTimeout(function tick() {
          if (slow || slowMs >= opts.timeoutMs) {
            request.destroy(new TimedOut(`timed out after ${opts.timeoutMs} ms`));
          } else {
            slow = true;
            giveBack();
            timer = setTimeout(tick, opts.timeoutMs - slowMs);
          }
        }, Math.min(slowMs, opts.timeoutMs));
        let answered = false;
        const resolve = (r: WebhookResult) => {
          if (answered) return;
          answered = true;
          clearTimeout(timer);
          giveBack();
          answer(r);
        };
        const headers: Record<string, string | number> = signatureHeaders(
          req.secret, req.body, req.updateId, Date.now(), req.secretHeader, keyOf(req.secret), req.previousSecret ? keyOf(req.previousSecret) : null,
        );
        headers['content-length'] = Buffer.byteLength(req.body);
        headers['user-agent'] = 'botplatform-webhooks/1';
        sentHeaders = {};
        for (const k in headers) sentHeaders[k] = String(headers[k]);
        const request = https.request({
          method: 'POST', protocol: 'https:', hostname: host, port, path: target.path,
          auth: target.auth, agent: poolFor(target.policyKey), lookup: target.lookup!, headers,
        }, (res) => {
          const code = res.statusCode ?? 0;
          const ok = code >= 200 && code < 300;
          // The body is read to its end either way, so the socket can be reused: its first
          // RESPONSE_BODY_KEPT bytes are kept for the delivery log, and the whole of a 2xx
          // one when asked for (keepAnswer).
          const keep = req.keepAnswer === true && ok;
          const chunks: Buffer[] = [];
          const logged: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            if (size < RESPONSE_BODY_KEPT) logged.push(chunk.subarray(0, RESPONSE_BODY_KEPT - size));
            size += chunk.length;
            if (!keep) return;
            if (size <= MAX_ANSWER_BYTES) chunks.push(chunk);
            else chunks.length = 0;
          });
          res.on('end', () => {
            const answer = keep && size > 0
              ? { contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks), tooLarge: size > MAX_ANSWER_BYTES }
              : undefined;
            const forLog = { headers: keptHeaders(res.headers), body: Buffer.concat(logged).toString('utf8'), truncated: size > RESPONSE_BODY_KEPT };
            resolve(done({ ok, statusCode: code, error: ok ? null : code >= 300 && code < 400 ? `redirect (${code}) not followed` : `HTTP ${code}`, noAnswer: null, answer }, forLog));
          });
        });
        // Whatever socket the request gets (new, or reused from the pool), its actual
        // peer must pass this request's own checks. 'socket' comes before the request
        // is flushed; a new socket is checked when its TCP connection is up, before
        // the TLS handshake, so nothing of the request leaves on a refused socket.
        request.on('socket', (socket: Socket) => {
          busy(socket); // a reused connection is busy again
          if (verified.get(socket) === target.checkKey) return;
          const verify = () => {
            const peer = socket.remoteAddress;
            const refusal = peer === undefined ? `${host} has no peer address` : judgeAddresses(host, port, [peer], policy, target.allowedIps);
            if (refusal) request.destroy(new Refused(`refused target: ${refusal}`));
            else verified.set(socket, target.checkKey);
          };
          if (socket.remoteAddress !== undefined) verify();
          else socket.once('connect', verify);
        });
        request.on('error', (err) => {
          resolve(done({
            ok: false, statusCode: null, error: err instanceof Refused ? err.message : describe(err),
            noAnswer: err instanceof Refused ? 'refused' : err instanceof TimedOut ? 'timeout' : 'network',
          }));
        });
        request.end(req.body);
      });
    },
    /** Requests progressing at once at one origin (socketsPerOrigin): see originOf. */
    turnsPerOrigin: bound,
    /** Connections open now, idle among them, and since start: the most open at once, those closed to make room, requests that waited for one. */
    sockets: () => ({ open, idle: idle.size, ...stats }),
    close() {
      for (const agent of pools.values()) agent.destroy();
      for (const w of slotWaiters.splice(0)) w.wake();
      pools.clear();
      targets.clear();
    },
  };
}

/** A short, safe description of a transport error (never a stack). */
function describe(err: Error & { code?: string }): string {
  if (err.message.startsWith('timed out')) return err.message;
  return err.code ? `${err.code}: ${err.message}`.slice(0, 300) : err.message.slice(0, 300);
}

export type WebhookClient = ReturnType<typeof createWebhookClient>;
