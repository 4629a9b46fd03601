// The bounds of the client API, each with a name, a unit last and a default (docs/api.md lists
// them). A request past a bound gets a catalogued error, never a silently dropped connection
// where it can be helped: 414 uri_too_long, 431 headers_too_large, 503 overloaded (this node is
// full) or 429 too_many_requests (this client address holds more than its share).

import { idLengthMax } from '../../fsm/limits.ts';

export interface ApiLimits {
  /** Request line URL (path and query) as sent, in bytes; longer is 414 uri_too_long. */
  urlBytesMax: number;
  /** Open HTTP connections on this node; a request on a connection past it gets 503 overloaded and the connection is closed. */
  connectionsMax: number;
  /** Open watch streams on this node; past it, 503 overloaded. */
  watchStreamsMax: number;
  /** Open watch streams per client address; past it, 429 too_many_requests. */
  watchStreamsPerClientMax: number;
  /** Concurrent GET /v1/cluster/snapshot downloads; past it, 503 overloaded. */
  snapshotDownloadsMax: number;
  /** Retry-After, in seconds, on 503 and 429 answers. */
  retryAfterSeconds: number;
}

export const apiLimitsDefault: Readonly<ApiLimits> = Object.freeze({
  // The longest legal URL (a list with a prefix and a cursor of 256 four-byte characters each,
  // URL-encoded) is about 6.3 KB; Node's own limit on the request head is 16 KiB.
  urlBytesMax: 8 * 1024,
  // Below the usual soft limit of 1,024 open files, which peers, the log and snapshots share.
  connectionsMax: 512,
  watchStreamsMax: 256,
  watchStreamsPerClientMax: 32,
  // Each download holds an image of the store until it is sent.
  snapshotDownloadsMax: 2,
  retryAfterSeconds: 1,
});

/**
 * fastify's maxParamLength: the longest legal id URL-encoded (each code point up to four UTF-8
 * bytes, each byte three characters as %XX). A longer path segment is 414 uri_too_long; a
 * shorter one reaches the id rule, which answers 400 with what is wrong.
 */
export const paramLengthMax = idLengthMax * 4 * 3;

/** Node's limit on the request head (request line and headers), in bytes: past it, 431 (or 414 when the URL alone is past it). */
export const headerBytesMax = 16 * 1024;
