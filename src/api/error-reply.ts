// Every answer that is not a success is {code, message, requestId, retryable, details?} with a
// code from the catalog (src/errors.ts): errors thrown in handlers, fastify's own (parse errors,
// bad URLs, over-long path segments) and the ones Node's HTTP parser answers before fastify sees
// a request (431 and friends, through clientErrorHandler).

import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { errorCatalog, isShoalError, ShoalError, type ErrorCode } from '../errors.ts';
import { apiLimitsDefault, headerBytesMax, paramLengthMax } from './limits.ts';
import { badRequest } from './validate.ts';

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  requestId: string;
  retryable: boolean;
  details?: Record<string, unknown>;
}

export function errorBody(err: ShoalError, requestId: string): ErrorBody {
  return {
    code: err.code, message: err.message, requestId, retryable: err.retryable,
    ...(err.details !== undefined ? { details: err.details } : {}),
  };
}

/** Maps anything thrown in a handler, including fastify's own errors, to a catalog error; `bodyBytesMax` is the limit a 413 names. */
export function toShoalError(err: FastifyError | Error, bodyBytesMax?: number): ShoalError {
  if (isShoalError(err)) return err;
  const fe = err as FastifyError;
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return bodyBytesMax === undefined
        ? new ShoalError('payload_too_large', `${fe.message}; the limit is set by limits.bodyBytesMax`)
        : new ShoalError('payload_too_large', `the request body is larger than ${bodyBytesMax} bytes, the limit set by limits.bodyBytesMax`, { limit: 'bodyBytesMax', max: bodyBytesMax });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE': return new ShoalError('unsupported_media_type', 'send the body as application/json');
    case 'FST_ERR_BAD_URL': return badRequest([{ path: 'path', message: 'the path is not valid percent-encoded UTF-8 (a stray %, or an encoded lone surrogate)' }]);
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new ShoalError('uri_too_long', `a path segment is longer than ${paramLengthMax} characters (the longest id, URL-encoded)`, { limit: 'paramLengthMax', max: paramLengthMax });
    default: break;
  }
  if (fe.statusCode !== undefined && fe.statusCode >= 400 && fe.statusCode < 500) return badRequest([{ path: 'request', message: fe.message }]);
  return new ShoalError('internal', 'an unexpected error occurred; see the node log');
}


/** Sends a catalog error; 503 and 429 answers carry Retry-After. */
export function sendError(reply: FastifyReply, req: FastifyRequest, e: ShoalError, retryAfterSeconds = apiLimitsDefault.retryAfterSeconds): FastifyReply {
  if (e.retryable && (e.status === 503 || e.status === 429) && !reply.hasHeader('retry-after')) void reply.header('retry-after', String(retryAfterSeconds));
  return reply.status(errorCatalog[e.code].status).send(errorBody(e, req.id));
}

/**
 * Whether the request line alone was past Node's limit on the request head: the chunk the parser
 * failed on starts the request and its first line ends past the limit (or not at all). A head
 * that came in several chunks cannot be told apart, and is answered as headers_too_large.
 */
function requestLineOverflowed(raw: unknown): boolean {
  if (!Buffer.isBuffer(raw) || !/^[A-Z]+ /.test(raw.subarray(0, 16).toString('latin1'))) return false;
  const lineEnd = raw.indexOf('\r\n');
  return lineEnd === -1 || lineEnd > headerBytesMax;
}

/** An error Node's HTTP parser met before there was a request to hand to fastify. */
export function clientErrorOf(err: NodeJS.ErrnoException & { rawPacket?: unknown }): ShoalError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      if (requestLineOverflowed(err.rawPacket)) {
        return new ShoalError('uri_too_long', 'the request URL is longer than the request head may be (16 KiB)', { limit: 'headerBytesMax' });
      }
      return new ShoalError('headers_too_large', 'the request headers are larger than 16 KiB', { limit: 'headerBytesMax' });
    case 'ERR_HTTP_REQUEST_TIMEOUT':
    case 'ERR_HTTP_HEADERS_TIMEOUT':
      return new ShoalError('timeout', 'the request was not received in time');
    default:
      return new ShoalError('bad_request', `the request is not valid HTTP/1.1 (${err.code ?? err.message})`, { problems: [{ path: 'request', message: err.message }] });
  }
}

/** fastify's clientErrorHandler: answers on the raw socket with a catalogued JSON error, then closes it. */
export function clientErrorHandler(err: NodeJS.ErrnoException & { rawPacket?: unknown }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const e = clientErrorOf(err);
  const body = JSON.stringify(errorBody(e, randomUUID()));
  const head = [
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? 'Error'}`, 'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`, 'connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
}
