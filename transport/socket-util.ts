// Small helpers shared by the outbound and inbound sides of a peer connection.

import WebSocket from 'ws';
import type { RawData } from 'ws';

/** The one HTTP path the peer listener upgrades; anything else gets 426. */
export const PEER_PATH = '/shoal/v1/peer';

/** "host:port", bracketing IPv6 literals so the result parses back and fits in a URL. */
export function formatAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export function rawDataToBytes(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return data;
}

/**
 * Closes with a close frame and waits for the socket to end; cuts it after `graceMs` if the
 * peer does not answer (a half-open connection would otherwise hold `close()` for ws's 30 s).
 */
export function closeSocket(ws: WebSocket, code: number, reason: string, graceMs: number): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve();
  return new Promise((resolve) => {
    // Resolve on the timer too: close() must not hang on a socket that never reports closing.
    const timer = setTimeout(() => {
      ws.terminate();
      resolve();
    }, graceMs);
    ws.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    // A connection still in its HTTP upgrade cannot carry a close frame.
    if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
    else if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
  });
}

/**
 * A ping payload: the send time (performance.now()), so the matching pong yields the round trip,
 * then a second double left 0 for the answering node to fill with its wall clock
 * (pongPayloadFor). A node of the first release echoes all 16 bytes (ws answers pings itself):
 * its pong then carries the 0, which says "no clock" (readPong). The first release pings with the
 * 8-byte form, which this release echoes as it is.
 */
export function pingPayload(nowMs: number): Buffer {
  const b = Buffer.alloc(clockPingBytes);
  b.writeDoubleLE(nowMs, 0);
  return b;
}

/** The ping (and pong) that carries a wall clock: send time, then the answerer's Date.now(). */
export const clockPingBytes = 16;
/** The first release's ping: the send time alone. */
const plainPingBytes = 8;

/**
 * What this node answers a ping with: a 16-byte ping gets its send time back with this node's
 * wall clock (ms since the epoch) after it; any other ping is echoed as it came (what ws's own
 * answer does, and what a first-release pinger checks).
 */
export function pongPayloadFor(ping: Buffer, wallNowMs: number): Buffer {
  if (ping.byteLength !== clockPingBytes) return ping;
  const b = Buffer.from(ping);
  b.writeDoubleLE(wallNowMs, plainPingBytes);
  return b;
}

export interface Pong {
  /** The round trip, or null when the payload is not one of this node's pings. */
  rttMs: number | null;
  /** The answering node's wall clock when it answered; null when it did not say (a first-release peer). */
  remoteWallMs: number | null;
}

export function readPong(payload: Buffer, nowMs: number): Pong {
  if (payload.byteLength !== plainPingBytes && payload.byteLength !== clockPingBytes) return { rttMs: null, remoteWallMs: null };
  const rtt = nowMs - payload.readDoubleLE(0);
  const rttMs = Number.isFinite(rtt) && rtt >= 0 ? rtt : null;
  const wall = payload.byteLength === clockPingBytes ? payload.readDoubleLE(plainPingBytes) : 0;
  return { rttMs, remoteWallMs: rttMs !== null && Number.isFinite(wall) && wall > 0 ? wall : null };
}

export function rttFromPong(payload: Buffer, nowMs: number): number | null {
  return readPong(payload, nowMs).rttMs;
}
