/**
 * Requests Node's HTTP server refuses before Fastify answers them (a malformed request
 * line or header, headers past Node's size limit, a request that did not arrive within
 * REQUEST_TIMEOUT): answered in the contract's envelope of the path's surface, like every
 * other failure, instead of Fastify's default bodies. There is no request or reply object
 * then: the answer is written to the socket, which is then closed.
 */
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { ApiError, Code } from '../../src/errors.js';
import { renderError, surfaceOfPath } from './envelopes.js';

/** What Node hands the server's `clientError` listeners. */
interface ClientError extends Error {
  code?: string;
  /** The bytes being parsed: the request line and headers, credentials included. Never logged (logger.ts). */
  rawPacket?: unknown;
}

/** The path of the request line at the start of the bytes Node was parsing, if there is one (else ''). */
function pathOf(raw: unknown): string {
  if (!Buffer.isBuffer(raw)) return '';
  const line = raw.subarray(0, 4096).toString('latin1');
  return /^[A-Z]+ (\S+)/.exec(line)?.[1] ?? '';
}

function errorOf(err: ClientError): ApiError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError(Code.INVALID_ARGUMENT, 'the request headers are too large', { httpStatus: 431 });
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError(Code.DEADLINE_EXCEEDED, 'the request did not arrive in time', { httpStatus: 408 });
    default:
      return new ApiError(Code.INVALID_ARGUMENT, 'malformed HTTP request');
  }
}

/** Fastify's `clientErrorHandler`: the envelope where the socket can still take an answer, then the socket closed. */
export function answerClientError(err: ClientError, socket: Socket, log: FastifyBaseLogger): void {
  // A connection reset, or a socket already gone: there is no one to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  log.trace({ err }, 'client error');
  // As Node's own default: an answer only when no response of this connection has begun
  // (an answer after part of another would corrupt the stream).
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean; req?: { url?: string } } | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    // The path: from the bytes being parsed, or (a request that did not arrive in time,
    // its headers read) from the request Node made of them.
    const path = pathOf(err.rawPacket) || inFlight?.req?.url || '';
    const { status, headers, body } = renderError(errorOf(err), surfaceOfPath(path));
    const text = JSON.stringify(body);
    const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`];
    for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
    lines.push(`content-length: ${Buffer.byteLength(text)}`, 'connection: close');
    socket.write(`${lines.join('\r\n')}\r\n\r\n${text}`);
  }
  socket.destroy(err);
}
